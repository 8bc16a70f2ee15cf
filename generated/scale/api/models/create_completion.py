from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.completion_request_v2 import CompletionRequestV2
from ...models.completion_response import CompletionResponse
from ...models.http_validation_error import HTTPValidationError
from ...types import Response


def _get_kwargs(
    model_deployment_id: str,
    *,
    body: CompletionRequestV2,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v4/models/{model_deployment_id}/completions".format(
            model_deployment_id=quote(str(model_deployment_id), safe=""),
        ),
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> CompletionResponse | HTTPValidationError | None:
    if response.status_code == 200:
        response_200 = CompletionResponse.from_dict(response.json())

        return response_200

    if response.status_code == 422:
        response_422 = HTTPValidationError.from_dict(response.json())

        return response_422

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[CompletionResponse | HTTPValidationError]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    model_deployment_id: str,
    *,
    client: AuthenticatedClient | Client,
    body: CompletionRequestV2,
) -> Response[CompletionResponse | HTTPValidationError]:
    """Generate completion

     ### Description

    Interact with the LLM model using the specified model_deployment_id. The LLM model will generate a
    text completion based on the provided prompt.

    ```json
    { "prompt": "What is the capital of France?" }
    ```

    Args:
        model_deployment_id (str):
        body (CompletionRequestV2):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[CompletionResponse | HTTPValidationError]
    """

    kwargs = _get_kwargs(
        model_deployment_id=model_deployment_id,
        body=body,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    model_deployment_id: str,
    *,
    client: AuthenticatedClient | Client,
    body: CompletionRequestV2,
) -> CompletionResponse | HTTPValidationError | None:
    """Generate completion

     ### Description

    Interact with the LLM model using the specified model_deployment_id. The LLM model will generate a
    text completion based on the provided prompt.

    ```json
    { "prompt": "What is the capital of France?" }
    ```

    Args:
        model_deployment_id (str):
        body (CompletionRequestV2):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        CompletionResponse | HTTPValidationError
    """

    return sync_detailed(
        model_deployment_id=model_deployment_id,
        client=client,
        body=body,
    ).parsed


async def asyncio_detailed(
    model_deployment_id: str,
    *,
    client: AuthenticatedClient | Client,
    body: CompletionRequestV2,
) -> Response[CompletionResponse | HTTPValidationError]:
    """Generate completion

     ### Description

    Interact with the LLM model using the specified model_deployment_id. The LLM model will generate a
    text completion based on the provided prompt.

    ```json
    { "prompt": "What is the capital of France?" }
    ```

    Args:
        model_deployment_id (str):
        body (CompletionRequestV2):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[CompletionResponse | HTTPValidationError]
    """

    kwargs = _get_kwargs(
        model_deployment_id=model_deployment_id,
        body=body,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    model_deployment_id: str,
    *,
    client: AuthenticatedClient | Client,
    body: CompletionRequestV2,
) -> CompletionResponse | HTTPValidationError | None:
    """Generate completion

     ### Description

    Interact with the LLM model using the specified model_deployment_id. The LLM model will generate a
    text completion based on the provided prompt.

    ```json
    { "prompt": "What is the capital of France?" }
    ```

    Args:
        model_deployment_id (str):
        body (CompletionRequestV2):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        CompletionResponse | HTTPValidationError
    """

    return (
        await asyncio_detailed(
            model_deployment_id=model_deployment_id,
            client=client,
            body=body,
        )
    ).parsed
