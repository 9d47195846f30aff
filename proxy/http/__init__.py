"""The ASGI edge: what a client sees. The endpoint table (endpoints.py), reading and parsing a
body, the routes and their thin handlers, middleware, relaying an answer or an OpenAI-style
error, and running uvicorn. Add an endpoint here."""
