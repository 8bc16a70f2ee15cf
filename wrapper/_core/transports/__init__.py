"""How requests reach the network: the seam (``base``), httpx's and aiohttp's transports, the async
clients' choice between them (``choice``), the pools and what keeps them per process (``fork``) and
per event loop (``loop_pools``), when a connection may be reused (``reuse``), the one thread that
does what is due at a time (``timers``: deadlines of sync calls, the sync pool's sweep of idle
connections), and what the environment says of the network (``environment``)."""
