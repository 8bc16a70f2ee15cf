"""How requests reach the network: the seam (``base``), httpx's and aiohttp's transports, the async
clients' choice between them (``choice``), the pools and what keeps them per process (``fork``) and
per event loop (``loop_pools``), and what the environment says of the network (``environment``)."""
