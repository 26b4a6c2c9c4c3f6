from rest_framework.routers import SimpleRouter

from tasksets.api.views import TaskSetViewSet

app_name = "tasksets-api"
router = SimpleRouter()
router.trailing_slash = "/?"  # /api/v1/task-sets, as the tasks; a trailing slash too
router.register("task-sets", TaskSetViewSet, basename="task-set")
urlpatterns = router.urls
