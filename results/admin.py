from django.contrib import admin

from results.models import OutputFile, OutputManifest


@admin.register(OutputManifest)
class OutputManifestAdmin(admin.ModelAdmin):
    list_display = ["attempt", "state", "store", "created_at"]
    list_filter = ["state", "store"]
    raw_id_fields = ["attempt"]
    readonly_fields = ["attempt", "state", "reason", "store", "location", "created_at", "updated_at"]


@admin.register(OutputFile)
class OutputFileAdmin(admin.ModelAdmin):
    list_display = ["name", "attempt", "state", "bytes", "sha256"]
    list_filter = ["state"]
    search_fields = ["name", "sha256", "attempt__external_name"]
    list_select_related = ["attempt"]
    raw_id_fields = ["attempt"]
    readonly_fields = ["attempt", "name", "state", "bytes", "sha256", "ref", "reason", "created_at", "updated_at"]
