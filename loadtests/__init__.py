"""Locust load tests of ``POST /rank`` with the service's traffic mix (see ``locustfile.py``)."""
