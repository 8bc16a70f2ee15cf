from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.body_parsing_error import BodyParsingError
from ...models.complete_model_body_params import CompleteModelBodyParams
from ...models.complete_model_success import CompleteModelSuccess
from ...models.failed_error import FailedError
from ...models.flagged_content_error import FlaggedContentError
from ...models.model_does_not_support_guidance_error import (
    ModelDoesNotSupportGuidanceError,
)
from ...models.no_rag_documents_found_error import NoRagDocumentsFoundError
from ...models.query_or_path_parsing_error import QueryOrPathParsingError
from ...models.rag_requires_auto_templating_error import RagRequiresAutoTemplatingError
from ...models.unknown_base_model_error import UnknownBaseModelError
from ...models.unknown_model_adapter_error import UnknownModelAdapterError
from ...models.unknown_rag_collection_error import UnknownRagCollectionError
from ...models.unprocessable_content_error import UnprocessableContentError
from ...types import Response


def _get_kwargs(
    id: str,
    *,
    body: CompleteModelBodyParams,
    x_gradient_workspace_id: str,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}
    headers["x-gradient-workspace-id"] = x_gradient_workspace_id

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/models/{id}/complete".format(
            id=quote(str(id), safe=""),
        ),
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> (
    BodyParsingError
    | FailedError
    | FlaggedContentError
    | ModelDoesNotSupportGuidanceError
    | NoRagDocumentsFoundError
    | QueryOrPathParsingError
    | RagRequiresAutoTemplatingError
    | UnknownBaseModelError
    | UnknownModelAdapterError
    | UnknownRagCollectionError
    | UnprocessableContentError
    | CompleteModelSuccess
    | None
):
    if response.status_code == 200:
        response_200 = CompleteModelSuccess.from_dict(response.json())

        return response_200

    if 400 <= response.status_code <= 499:

        def _parse_response_4xx(
            data: object,
        ) -> (
            BodyParsingError
            | FailedError
            | FlaggedContentError
            | ModelDoesNotSupportGuidanceError
            | NoRagDocumentsFoundError
            | QueryOrPathParsingError
            | RagRequiresAutoTemplatingError
            | UnknownBaseModelError
            | UnknownModelAdapterError
            | UnknownRagCollectionError
            | UnprocessableContentError
        ):
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                componentsschemas_complete_model_error_type_0 = (
                    FlaggedContentError.from_dict(data)
                )

                return componentsschemas_complete_model_error_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                componentsschemas_complete_model_error_type_1 = (
                    BodyParsingError.from_dict(data)
                )

                return componentsschemas_complete_model_error_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                componentsschemas_complete_model_error_type_2 = (
                    QueryOrPathParsingError.from_dict(data)
                )

                return componentsschemas_complete_model_error_type_2
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                componentsschemas_complete_model_error_type_3 = FailedError.from_dict(
                    data
                )

                return componentsschemas_complete_model_error_type_3
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                componentsschemas_complete_model_error_type_4 = (
                    ModelDoesNotSupportGuidanceError.from_dict(data)
                )

                return componentsschemas_complete_model_error_type_4
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                componentsschemas_complete_model_error_type_5 = (
                    NoRagDocumentsFoundError.from_dict(data)
                )

                return componentsschemas_complete_model_error_type_5
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                componentsschemas_complete_model_error_type_6 = (
                    RagRequiresAutoTemplatingError.from_dict(data)
                )

                return componentsschemas_complete_model_error_type_6
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                componentsschemas_complete_model_error_type_7 = (
                    UnknownBaseModelError.from_dict(data)
                )

                return componentsschemas_complete_model_error_type_7
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                componentsschemas_complete_model_error_type_8 = (
                    UnknownModelAdapterError.from_dict(data)
                )

                return componentsschemas_complete_model_error_type_8
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                componentsschemas_complete_model_error_type_9 = (
                    UnknownRagCollectionError.from_dict(data)
                )

                return componentsschemas_complete_model_error_type_9
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            if not isinstance(data, dict):
                raise TypeError()
            componentsschemas_complete_model_error_type_10 = (
                UnprocessableContentError.from_dict(data)
            )

            return componentsschemas_complete_model_error_type_10

        response_4xx = _parse_response_4xx(response.json())

        return response_4xx

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[
    BodyParsingError
    | FailedError
    | FlaggedContentError
    | ModelDoesNotSupportGuidanceError
    | NoRagDocumentsFoundError
    | QueryOrPathParsingError
    | RagRequiresAutoTemplatingError
    | UnknownBaseModelError
    | UnknownModelAdapterError
    | UnknownRagCollectionError
    | UnprocessableContentError
    | CompleteModelSuccess
]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    id: str,
    *,
    client: AuthenticatedClient | Client,
    body: CompleteModelBodyParams,
    x_gradient_workspace_id: str,
) -> Response[
    BodyParsingError
    | FailedError
    | FlaggedContentError
    | ModelDoesNotSupportGuidanceError
    | NoRagDocumentsFoundError
    | QueryOrPathParsingError
    | RagRequiresAutoTemplatingError
    | UnknownBaseModelError
    | UnknownModelAdapterError
    | UnknownRagCollectionError
    | UnprocessableContentError
    | CompleteModelSuccess
]:
    """Complete model

     Completes your fine-tuned model with the specified prompt string. The model will generate a
    completion.

    Args:
        id (str): The ID of the base model or fine-tuned model that is being completed.
        x_gradient_workspace_id (str):
        body (CompleteModelBodyParams):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[BodyParsingError | FailedError | FlaggedContentError | ModelDoesNotSupportGuidanceError | NoRagDocumentsFoundError | QueryOrPathParsingError | RagRequiresAutoTemplatingError | UnknownBaseModelError | UnknownModelAdapterError | UnknownRagCollectionError | UnprocessableContentError | CompleteModelSuccess]
    """

    kwargs = _get_kwargs(
        id=id,
        body=body,
        x_gradient_workspace_id=x_gradient_workspace_id,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    id: str,
    *,
    client: AuthenticatedClient | Client,
    body: CompleteModelBodyParams,
    x_gradient_workspace_id: str,
) -> (
    BodyParsingError
    | FailedError
    | FlaggedContentError
    | ModelDoesNotSupportGuidanceError
    | NoRagDocumentsFoundError
    | QueryOrPathParsingError
    | RagRequiresAutoTemplatingError
    | UnknownBaseModelError
    | UnknownModelAdapterError
    | UnknownRagCollectionError
    | UnprocessableContentError
    | CompleteModelSuccess
    | None
):
    """Complete model

     Completes your fine-tuned model with the specified prompt string. The model will generate a
    completion.

    Args:
        id (str): The ID of the base model or fine-tuned model that is being completed.
        x_gradient_workspace_id (str):
        body (CompleteModelBodyParams):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        BodyParsingError | FailedError | FlaggedContentError | ModelDoesNotSupportGuidanceError | NoRagDocumentsFoundError | QueryOrPathParsingError | RagRequiresAutoTemplatingError | UnknownBaseModelError | UnknownModelAdapterError | UnknownRagCollectionError | UnprocessableContentError | CompleteModelSuccess
    """

    return sync_detailed(
        id=id,
        client=client,
        body=body,
        x_gradient_workspace_id=x_gradient_workspace_id,
    ).parsed


async def asyncio_detailed(
    id: str,
    *,
    client: AuthenticatedClient | Client,
    body: CompleteModelBodyParams,
    x_gradient_workspace_id: str,
) -> Response[
    BodyParsingError
    | FailedError
    | FlaggedContentError
    | ModelDoesNotSupportGuidanceError
    | NoRagDocumentsFoundError
    | QueryOrPathParsingError
    | RagRequiresAutoTemplatingError
    | UnknownBaseModelError
    | UnknownModelAdapterError
    | UnknownRagCollectionError
    | UnprocessableContentError
    | CompleteModelSuccess
]:
    """Complete model

     Completes your fine-tuned model with the specified prompt string. The model will generate a
    completion.

    Args:
        id (str): The ID of the base model or fine-tuned model that is being completed.
        x_gradient_workspace_id (str):
        body (CompleteModelBodyParams):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[BodyParsingError | FailedError | FlaggedContentError | ModelDoesNotSupportGuidanceError | NoRagDocumentsFoundError | QueryOrPathParsingError | RagRequiresAutoTemplatingError | UnknownBaseModelError | UnknownModelAdapterError | UnknownRagCollectionError | UnprocessableContentError | CompleteModelSuccess]
    """

    kwargs = _get_kwargs(
        id=id,
        body=body,
        x_gradient_workspace_id=x_gradient_workspace_id,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    id: str,
    *,
    client: AuthenticatedClient | Client,
    body: CompleteModelBodyParams,
    x_gradient_workspace_id: str,
) -> (
    BodyParsingError
    | FailedError
    | FlaggedContentError
    | ModelDoesNotSupportGuidanceError
    | NoRagDocumentsFoundError
    | QueryOrPathParsingError
    | RagRequiresAutoTemplatingError
    | UnknownBaseModelError
    | UnknownModelAdapterError
    | UnknownRagCollectionError
    | UnprocessableContentError
    | CompleteModelSuccess
    | None
):
    """Complete model

     Completes your fine-tuned model with the specified prompt string. The model will generate a
    completion.

    Args:
        id (str): The ID of the base model or fine-tuned model that is being completed.
        x_gradient_workspace_id (str):
        body (CompleteModelBodyParams):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        BodyParsingError | FailedError | FlaggedContentError | ModelDoesNotSupportGuidanceError | NoRagDocumentsFoundError | QueryOrPathParsingError | RagRequiresAutoTemplatingError | UnknownBaseModelError | UnknownModelAdapterError | UnknownRagCollectionError | UnprocessableContentError | CompleteModelSuccess
    """

    return (
        await asyncio_detailed(
            id=id,
            client=client,
            body=body,
            x_gradient_workspace_id=x_gradient_workspace_id,
        )
    ).parsed
