import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
application = get_wsgi_application()

# A serving process imports the model providers' code now, not in the first request that starts a
# run (the offline analyst loads scikit-learn: 11 s on a loaded machine, over the API's 10 s budget).
from runs.providers import preload_providers  # noqa: E402  (needs the settings get_wsgi_application set up)

preload_providers()
