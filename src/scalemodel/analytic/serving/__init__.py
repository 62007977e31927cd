"""The serving planner (``scalemodel plan serve``): iteration times from the step model's parts
(:mod:`.iteration`), an iteration-level simulation of the engine's scheduler (:mod:`.scheduler`),
request streams (:mod:`.streams`), engine settings (:mod:`.engine`) and the layout search
(:mod:`.search`)."""
