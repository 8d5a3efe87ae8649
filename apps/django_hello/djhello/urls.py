from django.http import HttpResponse
from django.urls import path


def hello(request):
    return HttpResponse(b"Hello, World!", content_type="text/plain")


urlpatterns = [path("", hello)]
