"""Validate an event envelope against its channel's payload schema in asyncapi.draft.yaml."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from referencing import Registry
from referencing.jsonschema import DRAFT202012

from tests.support.openapi import load_yaml

DOC = load_yaml((Path(__file__).resolve().parents[2] / "asyncapi.draft.yaml").read_text())
REGISTRY = Registry().with_resource("urn:asyncapi", DRAFT202012.create_resource(DOC))


def validate(event: dict[str, Any]) -> None:
    channel = DOC["channels"][event["type"]]
    ref = channel["messages"]["event"]["$ref"]
    schema = {"$ref": f"urn:asyncapi{ref}/payload"}
    Draft202012Validator(schema, registry=REGISTRY).validate(event)
