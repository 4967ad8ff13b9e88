"""The REST API's routers, one module per resource: health, project, models, runs, results, compare."""
