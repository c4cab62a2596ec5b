"""Pure cores: no aiohttp, no asyncio, no clock, no network. Tested with plain data."""
