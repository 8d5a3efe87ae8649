"""A one-file Django app that answers with request.build_absolute_uri() and
is_secure(): how Django sees the scheme and host cserve gives it."""
import django
from django.conf import settings

settings.configure(
    DEBUG=False,
    SECRET_KEY="test-only",
    ALLOWED_HOSTS=["*"],
    ROOT_URLCONF=__name__,
    MIDDLEWARE=[],
    INSTALLED_APPS=[],
)
django.setup()

from django.http import JsonResponse  # noqa: E402
from django.urls import path  # noqa: E402
from django.core.wsgi import get_wsgi_application  # noqa: E402


def where(request):
    return JsonResponse({"url": request.build_absolute_uri(), "secure": request.is_secure(),
                         "remote": request.META.get("REMOTE_ADDR")})


urlpatterns = [path("where", where)]
application = get_wsgi_application()
