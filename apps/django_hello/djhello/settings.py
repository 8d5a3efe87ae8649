"""The least Django needs to serve one view: no database, no templates, no
sessions; the common and security middleware a default project runs stay on
so the row measures what a real deployment pays."""
SECRET_KEY = "cserve-experiments-not-secret"
DEBUG = False
ALLOWED_HOSTS = ["*"]
ROOT_URLCONF = "djhello.urls"
INSTALLED_APPS = []
MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.middleware.common.CommonMiddleware",
]
DATABASES = {}
USE_TZ = True
