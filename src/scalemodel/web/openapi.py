"""The OpenAPI 3.1 document of the JSON API, derived from the CLI parsers."""

from __future__ import annotations

from typing import Any

from .. import __version__
from .limits import GENERIC_FLOAT, GENERIC_INT, LIMITS


def _schema(f: Any) -> dict[str, Any]:
    if f.kind == "flag":
        return {"type": "boolean"}
    if f.choices:
        return {"type": "string", "enum": list(f.choices)}
    if f.type_name == "integer":
        lo, hi = LIMITS.get(f.dest, (-GENERIC_INT, GENERIC_INT))
        return {"type": "integer", "minimum": int(lo), "maximum": int(hi)}
    if f.type_name == "number":
        lo, hi = LIMITS.get(f.dest, (-GENERIC_FLOAT, GENERIC_FLOAT))
        return {"type": "number", "minimum": lo, "maximum": hi}
    return {"type": "string", "maxLength": 500}


def openapi_document(st: Any) -> dict[str, Any]:
    paths: dict[str, Any] = {}
    for path, (_parser, help_) in st.tree.items():
        params = []
        for f in st.fields[path]:
            sch = _schema(f)
            if f.default is not None and f.kind != "flag" and not isinstance(f.default, list):
                sch["default"] = f.default
            params.append({"name": f.dest, "in": "query", "required": f.required,
                           "description": f.help or f.dest, "schema": sch})
        paths[f"/api/{path}"] = {"get": {
            "operationId": "cli_" + path.replace("/", "_").replace("-", "_"),
            "summary": help_ or path,
            "description": f"Runs `scalemodel {path.replace('/', ' ')} --json`; the response has "
                           "the same keys.",
            "parameters": params,
            "responses": {
                "200": {"description": "the command's --json result",
                        "content": {"application/json": {"schema": {}}}},
                "400": {"description": "bad input: one line naming the field",
                        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}},
                "503": {"description": "the computation exceeded the time limit",
                        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}},
            },
        }}
    from ..questions import BANK

    ids = [q.id for q in BANK if q.status == "answered"]
    paths["/api/answer"] = {"get": {
        "operationId": "cli_answer",
        "summary": "the worked answer to one question",
        "description": "Runs `scalemodel answer ID --json`; the question's own parameters are "
                       "listed under /api/answer/{ID} (another is refused with 400).",
        "parameters": [{"name": "id", "in": "query", "required": True,
                        "description": "question id", "schema": {"type": "string", "enum": ids}}],
        "responses": paths[f"/api/answer/{ids[0]}"]["get"]["responses"] if ids else {},
    }}
    return {
        "openapi": "3.1.0",
        "info": {"title": "scalemodel", "version": __version__,
                 "description": "JSON API mirroring the scalemodel command line: every command's "
                                "--json output, with its flags as query parameters (by dest "
                                "name, e.g. kv_dtype for --kv-dtype)."},
        "paths": paths,
        "components": {"schemas": {"Error": {
            "type": "object", "required": ["error"],
            "properties": {"error": {"type": "string"}, "field": {"type": "string"}}}}},
    }
