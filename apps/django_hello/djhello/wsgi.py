"""WSGI entry: serve with `--chdir apps/django_hello djhello.wsgi:application`."""
import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "djhello.settings")
application = get_wsgi_application()
