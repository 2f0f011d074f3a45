"""The bound on a response body, apart from the transports that enforce it
(`providers.api._bounded_body`), so that checking for its error does not import httpx."""

from __future__ import annotations

MAX_BODY_BYTES = 256 * 2**20  # far above any answer or batch output file the harness reads


class ResponseTooLarge(ValueError):
    """A response body larger than `limit` (MAX_BODY_BYTES) once decompressed."""

    def __init__(self, limit: int) -> None:
        super().__init__(
            f"the response body is larger than {limit:,} bytes once decompressed "
            "(a compression bomb?): not read"
        )
