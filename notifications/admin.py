"""Webhook endpoints and their delivery log in the admin; the feed itself, read-only."""

from __future__ import annotations

from django.contrib import admin, messages

from notifications.models import EmailPreference, FeedEvent, FeedSequence, WebhookDelivery, WebhookEndpoint
from notifications.webhooks import delivery_redeliver, new_secret, target_refusal


@admin.register(WebhookEndpoint)
class WebhookEndpointAdmin(admin.ModelAdmin):
    list_display = ["url", "project", "is_active", "event_types", "after_position", "created_at"]
    list_filter = ["is_active", "project"]
    search_fields = ["url", "description"]
    readonly_fields = ["after_position", "created_by", "created_at"]

    def get_readonly_fields(self, request, obj=None):
        """Staff may pause or delete an endpoint, not repoint it: its URL receives the project's events signed
        with its secret, so only the project's admins (the API, the portal) choose where they go."""
        fields = list(super().get_readonly_fields(request, obj))
        return [*fields, "project", "url"] if obj is not None else fields

    fields = ["project", "url", "event_types", "description", "is_active", "after_position", "created_by"]

    def save_model(self, request, obj, form, change) -> None:
        refusal = target_refusal(obj.url)
        if refusal:
            self.message_user(request, f"Saved, but nothing will be delivered: {refusal}", messages.WARNING)
        if not change:
            secret = new_secret()
            obj.signing_secret = secret
            obj.created_by = request.user
            obj.after_position = FeedSequence.objects.filter(pk=1).values_list("last_position", flat=True).first() or 0
            # shown this once, like a token: it is the receiver's key to check signatures
            self.message_user(request, f"Signing secret (shown once): {secret}", messages.SUCCESS)
        super().save_model(request, obj, form, change)


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(admin.ModelAdmin):
    list_display = ["endpoint", "event", "state", "attempts", "last_status", "last_error", "next_attempt_at"]
    list_filter = ["state", "endpoint"]
    list_select_related = ["endpoint__project", "event"]
    actions = ["redeliver"]

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    @admin.action(description="Deliver again (same webhook-id)")
    def redeliver(self, request, queryset) -> None:
        for delivery in queryset:
            delivery_redeliver(delivery=delivery)


@admin.register(FeedEvent)
class FeedEventAdmin(admin.ModelAdmin):
    list_display = ["position", "type", "project", "task_id", "operation_id", "occurred_at"]
    list_filter = ["type"]

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


@admin.register(EmailPreference)
class EmailPreferenceAdmin(admin.ModelAdmin):
    list_display = ["user", "task_end", "operation_failed"]
    list_filter = ["task_end", "operation_failed"]
