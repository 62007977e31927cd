"""Views: Report objects built from engine results, shared by commands and worked answers.

A view turns one engine result into sections, headlines and tables (no printing: the report room
renders them). Commands and question modules both import views; views import engines and the
result types, never commands.

One module per tool, named for it: ``plan`` (plan train, --layouts, and the planned layout the
answers end with), ``comm`` (traffic per parallelism), ``collective`` (comm cost and comm
bench), ``roofline``, ``gpu`` (the GPU lab), ``memory`` (memory and the training-memory
answer), ``kv`` (kv and the kv-cache answer), ``reliability``, ``cluster``, ``triage``, ``bill``,
``claim``, ``drill``, ``validate`` (validate, --cv, --agreement; --serving is ``serving``'s),
``moe`` (moe route, place, serve; moe global is the moe-global-serving answer), ``specs`` and
``study`` (the question bank, the static site, serve). A command computes (engines) and hands
the results to its view; tests/unit/test_layering.py keeps Report and Section construction out
of commands/.
"""
