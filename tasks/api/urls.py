from rest_framework.routers import SimpleRouter

from tasks.api.views import TaskViewSet

app_name = "tasks-api"
router = SimpleRouter()
router.trailing_slash = "/?"  # DESIGN uses /api/v1/tasks; accept a trailing slash too
router.register("tasks", TaskViewSet, basename="task")
urlpatterns = router.urls
