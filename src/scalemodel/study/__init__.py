"""Study aids built on the engines: drills (random parameters graded by the engine)."""
