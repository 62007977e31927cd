"""schemathesis against the web API's own OpenAPI document: no request gets a server error.

Every operation of /openapi.json is called with generated valid and invalid parameters; bad
input must come back as a 4xx with a message, never a 500. (It found a path-length crash in
the spec loaders and the comm/triage/validate endpoints on its first run.)
"""

import pytest

schemathesis = pytest.importorskip("schemathesis")
pytest.importorskip("flask")

from hypothesis import HealthCheck, settings  # noqa: E402
from schemathesis.checks import not_a_server_error  # noqa: E402

from scalemodel.web.app import create_app  # noqa: E402

# a generous time limit: a 503 for a slow request on a loaded machine is declared, not a bug
schema = schemathesis.openapi.from_wsgi("/openapi.json", create_app(timeout_s=120))


@schema.parametrize()
@settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck))
def test_no_server_error(case):
    response = case.call()
    if response.status_code == 503 and "limit of the web app" in response.text:
        # the app's own declared refusal of a computation past its time limit (web/limits.py
        # time_limit), e.g. the whole serving validation when nothing in this process has priced
        # it yet (about 95 s of CPU since session 14 on an idle core, more on a loaded one;
        # docs/serving.md); any other 5xx still fails
        return
    case.validate_response(response, checks=[not_a_server_error])
