"""A property test over the OpenAPI document (in place of schemathesis, which is not installed):
requests built from each operation's declared parameters, valid and invalid, never get a server
error (5xx other than the declared 503 time limit) and always get JSON."""

import pytest

pytest.importorskip("flask")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from scalemodel.web import create_app  # noqa: E402

APP = create_app(timeout_s=10)
CLIENT = APP.test_client()
DOC = CLIENT.get("/openapi.json").get_json()
OPS = sorted(DOC["paths"])
JUNK = st.one_of(st.text(max_size=30), st.sampled_from(["-1", "0", "1e400", "nan", "<b>x</b>",
                                                        "../../etc/passwd", "--help", "-h", ""]))


def _value(schema):
    t = schema.get("type")
    if "enum" in schema:
        return st.one_of(st.sampled_from(schema["enum"]), JUNK)
    if t == "boolean":
        return st.one_of(st.sampled_from(["1", "0", "true", "false"]), JUNK)
    if t == "integer":
        lo, hi = schema.get("minimum", -10**6), schema.get("maximum", 10**6)
        return st.one_of(st.integers(lo, min(hi, lo + 4096)).map(str), JUNK)
    if t == "number":
        return st.one_of(st.floats(0.01, 1000).map(repr), JUNK)
    return st.one_of(st.sampled_from(["llama-3-70b", "h100-sxm", "kv-cache", "bf16", "8k"]), JUNK)


@st.composite
def request_for(draw):
    path = draw(st.sampled_from(OPS))
    params = DOC["paths"][path]["get"]["parameters"]
    chosen = draw(st.lists(st.sampled_from(params), unique_by=lambda p: p["name"], max_size=4)) \
        if params else []
    q = {p["name"]: draw(_value(p["schema"])) for p in chosen}
    return path, q


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(request_for())
def test_no_server_error(req):
    path, q = req
    r = CLIENT.get(path, query_string=q)
    assert r.status_code in (200, 400, 404, 503), (path, q, r.status_code, r.data[:300])
    body = r.get_json()
    assert body is not None
    if r.status_code != 200:
        assert isinstance(body.get("error"), str) and "\n" not in body["error"]
