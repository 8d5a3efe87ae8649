"""The whole wsgi_apps suite wrapped in wsgiref.validate.validator: any PEP 3333
violation by the server (environ types, input/errors methods, start_response,
close() not called) raises AssertionError or warns WSGIWarning, and either
ends up in the server's log."""
import warnings
from wsgiref.validate import WSGIWarning, validator

import wsgi_apps

# Make every validator warning visible in the log, every time.
warnings.simplefilter("always", WSGIWarning)

application = validator(wsgi_apps.application)
