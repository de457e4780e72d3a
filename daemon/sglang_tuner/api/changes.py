"""The /changes routes: every restart seen per target, and whether its new flags helped."""

from fastapi import APIRouter, Request
from fastapi.responses import Response

from sglang_tuner.api.context import (
    TEXT_RESPONSES,
    EvaluationDep,
    FormatQuery,
    require_target,
    wants_text,
)
from sglang_tuner.api.schemas.changes import ChangeList, change_list, changes_text

router = APIRouter()


@router.get("/changes", response_model=ChangeList, responses=TEXT_RESPONSES, tags=["changes"])
def list_changes(request: Request, ev: EvaluationDep, fmt: FormatQuery = None) -> Response:
    """Every recorded change of every target, newest first, with its verdict."""
    return _answer(change_list(ev.changes, None), request, fmt)


@router.get(
    "/changes/{target:path}",
    response_model=ChangeList,
    responses=TEXT_RESPONSES,
    tags=["changes"],
)
def read_target_changes(
    request: Request, target: str, ev: EvaluationDep, fmt: FormatQuery = None
) -> Response:
    """One target's recorded changes, newest first, with their verdicts."""
    require_target(ev, target)
    return _answer(change_list(ev.changes, target), request, fmt)


def _answer(out: ChangeList, request: Request, fmt: str | None) -> Response:
    if wants_text(request, fmt):
        return Response(changes_text(out), media_type="text/plain; charset=utf-8")
    return Response(out.model_dump_json(), media_type="application/json")
