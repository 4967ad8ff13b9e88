"""The web pages: server-rendered HTML (Jinja2, no JavaScript build, no CDN) as one router, on the API's dependencies."""
