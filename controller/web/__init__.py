"""How the controller talks to people: the REST API, its input validation and limits, the web view (static/) and
the Prometheus metrics. Imports the lower wings and controller.southbound.framework (the framework's WSGI glue).
"""
