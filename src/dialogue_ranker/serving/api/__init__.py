"""HTTP layer: routers, schemas and request middleware."""
