"""Gradient as the sandbox serves it: bearer token and workspace header, typed error bodies, guidance, RAG."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from . import _catalog
from ._catalog import Model
from ._handler import FAULT_HEADER, Call, Handler, sampling
from ._validate import Operation, error

STATUS = {
    "bodyParsingError": 400,
    "queryOrPathParsingError": 400,
    "flaggedContent": 400,
    "modelDoesNotSupportGuidance": 400,
    "ragRequiresAutoTemplating": 400,
    "unknownBaseModel": 404,
    "unknownModelAdapter": 404,
    "unknownRagCollection": 404,
    "noRagDocumentsFound": 404,
    "unprocessableContent": 422,
    "failed": 422,
}
"""The HTTP status the sandbox sends with each Gradient error ``type`` (the spec only says 4XX)."""

MODELS = (
    Model("nous-hermes2", 3, 1024, guidance=True, description="base model, trigram, supports guidance"),
    Model("llama2-7b-chat", 2, 512, description="base model, bigram, no guidance"),
    Model(
        "alice-adapter_model_adapter",
        3,
        1024,
        guidance=True,
        description="fine-tuned adapter of nous-hermes2, supports guidance",
    ),
)
ADAPTER_SUFFIX = "_model_adapter"
"""Unknown ids ending in this are ``unknownModelAdapter``, other unknown ids ``unknownBaseModel``."""

_WORKSPACE_HEADER = "x-gradient-workspace-id"
_TEMPERATURE = 0.7  # a default Gradient's spec leaves open


def _error(
    kind: str,
    message: str,
    status: int | None = None,
    *,
    issues: list[dict[str, Any]] | None = None,
    payload: dict[str, Any] | None = None,
) -> Response:
    """A Gradient error body of type ``kind`` (its status from ``STATUS`` unless given)."""
    body: dict[str, Any] = {"type": kind, "message": message}
    if kind in ("bodyParsingError", "queryOrPathParsingError"):  # their payload is required
        issues = issues or []
        formatted = "; ".join(f"{'.'.join(map(str, i['loc'])) or 'body'}: {i['msg']}" for i in issues)
        payload = {"validationError": issues, "formattedValidationError": formatted}
    if payload is not None:
        body["payload"] = payload
    return JSONResponse(body, status_code=status or STATUS[kind])


class GradientHandler(Handler):
    """``POST /api/models/{id}/complete``."""

    name = "gradient"
    title = "Gradient"
    operation = Operation(name, "/models/{id}/complete", "post", counts=("maxGeneratedTokenCount",))
    models = MODELS
    models_label = "models"
    headers_help = f"Authorization: Bearer <any>, {_WORKSPACE_HEADER}"
    default_max_tokens = 64  # a default Gradient's spec leaves open
    prompt_field = "query"
    max_tokens_field = "maxGeneratedTokenCount"
    credential_metavar = "TOKEN"
    credential_help = "bearer token"
    credential_name = "the access token"
    credential_how = "'Authorization: Bearer <token>'"

    def credential(self, request: Request) -> str:
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        return token.strip() if scheme.lower() == "bearer" else ""

    def check(self, request: Request, model_id: str) -> Response | None:
        if not request.headers.get(_WORKSPACE_HEADER):
            return _error(
                "queryOrPathParsingError",
                f"Header {_WORKSPACE_HEADER} is required",
                issues=[error((_WORKSPACE_HEADER,), "missing", "Field required")],
            )
        if not model_id or "/" in model_id:
            return _error(
                "queryOrPathParsingError",
                f"Invalid model id {model_id!r}",
                issues=[error(("id",), "string_too_short", "Invalid model id", model_id)],
            )
        return None

    def bad_fault_header(self, message: str, value: str) -> Response:
        issue = error((FAULT_HEADER,), "value_error", message, value)
        return _error("queryOrPathParsingError", f"Invalid {FAULT_HEADER} header", issues=[issue])

    def status_error(self, status: int, message: str) -> Response:
        return _error("failed", message, status)

    def invalid(self, errors: list[dict[str, Any]]) -> Response:
        return _error("bodyParsingError", "Invalid request body", issues=errors)

    def unknown_model(self, model_id: str) -> Response:
        kind = "unknownModelAdapter" if model_id.endswith(ADAPTER_SUFFIX) else "unknownBaseModel"
        return _error(kind, f"Model {model_id!r} does not exist")

    def listing(self, model: Model) -> dict[str, Any]:
        return {"id": model.id, "guidance": model.guidance, "context": model.context}

    def complete(self, call: Call) -> Response:
        model, lm, body = call.model, call.lm, call.body
        query: str = body["query"]
        if flagged := _catalog.flagged(query):
            return _error(
                "flaggedContent",
                "The query contains flagged content",
                payload={"flaggedContent": [{"sample": word} for word in flagged]},
            )
        if "guidance" in body and not model.guidance:
            return _error("modelDoesNotSupportGuidance", f"Model {call.model_id!r} does not support guidance")
        prompt = query
        if "rag" in body:
            if not body.get("autoTemplate", True):
                return _error("ragRequiresAutoTemplating", "RAG requires autoTemplate to be true")
            collection = body["rag"]["collectionId"]
            if collection != _catalog.RAG_COLLECTION:
                return _error("unknownRagCollection", f"RAG collection {collection!r} does not exist")
            documents = _catalog.retrieve(query)
            if not documents:
                return _error("noRagDocumentsFound", "No document in the collection matches the query")
            prompt = "\n\n".join([*documents, query])
        prompt_tokens = lm.count(prompt)
        if prompt_tokens > model.context:
            return _error(
                "unprocessableContent",
                f"The query has {prompt_tokens} tokens; {call.model_id!r} takes at most {model.context}",
            )
        if _catalog.FAIL_TRIGGER in query:
            return _error("failed", "Generation failed")
        if "guidance" in body:
            choice = lm.choose(prompt, body["guidance"]["value"])
            call.settle(prompt_tokens + lm.count(choice))
            return JSONResponse({"finishReason": "stop", "generatedOutput": choice})
        asked = sampling(
            body.get("temperature"),
            body.get("topK"),
            body.get("topP"),
            body.get("maxGeneratedTokenCount") or self.default_max_tokens,
            model.context - prompt_tokens,
            _TEMPERATURE,
        )
        generation = lm.generate(prompt, asked, call.rng)
        for _ in generation:
            pass
        call.settle(prompt_tokens + generation.tokens)
        return JSONResponse({"finishReason": generation.finish_reason, "generatedOutput": generation.text})

    def triggers_help(self) -> str:
        statuses = "\n".join(f"  {status}  {kind}" for kind, status in STATUS.items())
        return f"""\
RAG collection (rag.collectionId): {_catalog.RAG_COLLECTION!r},
{len(_catalog.RAG_DOCUMENTS)} documents about Alice; a query matches those sharing a word with it.
Error triggers (statuses by error type):
{statuses}
  unknown model id ending in {ADAPTER_SUFFIX!r} -> unknownModelAdapter,
  other unknown id -> unknownBaseModel
  query containing a blocklisted word ({", ".join(_catalog.BLOCKLIST)}) -> flaggedContent
  query containing {_catalog.FAIL_TRIGGER!r} -> failed
  query longer than the model's context -> unprocessableContent; guidance on a model without it ->
  modelDoesNotSupportGuidance; rag with autoTemplate false -> ragRequiresAutoTemplating; other
  collection -> unknownRagCollection; no matching document -> noRagDocumentsFound"""


HANDLER = GradientHandler()
