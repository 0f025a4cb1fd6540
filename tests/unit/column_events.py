"""Small builders of ``columnLineage`` facets and edge rows for the column-lineage tests."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

EDGES_SCHEMA = (
    "source_dataset_id string, source_field string, target_dataset_id string, target_field string, "
    "job_namespace string, job_name string, scope string, is_direct boolean"
)


def transformation(
    type_: str, subtype: str | None = None, description: str | None = None, masking: bool | None = None
) -> dict[str, Any]:
    """One ``transformations[]`` item (keys left out when None, as producers do)."""
    out: dict[str, Any] = {"type": type_}
    if subtype is not None:
        out["subtype"] = subtype
    if description is not None:
        out["description"] = description
    if masking is not None:
        out["masking"] = masking
    return out


def direct(subtype: str, description: str | None = None, masking: bool | None = None) -> dict[str, Any]:
    return transformation("DIRECT", subtype, description, masking)


def indirect(subtype: str, description: str | None = None, masking: bool | None = None) -> dict[str, Any]:
    return transformation("INDIRECT", subtype, description, masking)


def input_field(ds: tuple[str, str], field: str, *transformations: dict[str, Any]) -> dict[str, Any]:
    """An ``inputFields[]`` / ``dataset[]`` item; without transformations the key is left out (legacy)."""
    out: dict[str, Any] = {"namespace": ds[0], "name": ds[1], "field": field}
    if transformations:
        out["transformations"] = list(transformations)
    return out


def legacy_field(
    inputs: Sequence[dict[str, Any]], transformation_type: str | None, description: str | None = None
) -> dict[str, Any]:
    """An output field of facet 1-0-x: ``transformationType``/``transformationDescription`` only."""
    out: dict[str, Any] = {"inputFields": list(inputs)}
    if transformation_type is not None:
        out["transformationType"] = transformation_type
    if description is not None:
        out["transformationDescription"] = description
    return out


def column_lineage(
    fields: Mapping[str, Sequence[dict[str, Any]] | dict[str, Any]],
    dataset: Sequence[dict[str, Any]] = (),
) -> dict[str, Any]:
    """A ``columnLineage`` facet: each output field maps to its input fields (or a full field entry)."""
    out: dict[str, Any] = {
        "fields": {
            name: entry if isinstance(entry, dict) else {"inputFields": list(entry)}
            for name, entry in fields.items()
        }
    }
    if dataset:
        out["dataset"] = list(dataset)
    return out
