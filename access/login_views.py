"""The sign-in page with login throttling (rules in :mod:`access.lockouts`)."""

from __future__ import annotations

from typing import Any

from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth import views as auth_views
from django.contrib.auth.forms import AuthenticationForm
from django.core.exceptions import ValidationError
from django.http import HttpResponse

from access import lockouts


class ThrottledLoginMixin(AuthenticationForm):
    """Counts each attempt before its password is checked, refusing it if throttled;
    a right password takes the count back."""

    throttled: lockouts.LoginThrottled | None = None
    admission: lockouts.Admission | None = None

    def _address(self) -> str:
        return lockouts.client_address(self.request.META if self.request is not None else {})

    def clean(self) -> dict[str, Any]:
        username = self.cleaned_data.get("username")
        try:
            if username is not None and self.cleaned_data.get("password"):
                # The same condition under which AuthenticationForm checks the password.
                self.admission = lockouts.admit(account=username, address=self._address())
            else:
                lockouts.check(account=username, address=self._address())
        except lockouts.LoginThrottled as exc:
            self.throttled = exc
            raise ValidationError(str(exc), code="throttled") from None
        try:
            cleaned = super().clean()
        except ValidationError:
            if self.user_cache is not None and self.admission is not None:
                # The right password for an account not allowed in here (inactive, not
                # staff at the admin): not a guess, so not a failure.
                lockouts.release(self.admission)
            raise
        if self.user_cache is not None and self.admission is not None:
            lockouts.record_success(self.admission)
        return cleaned

    def get_invalid_login_error(self) -> ValidationError:
        # Called exactly when a name and a password were given and did not match.
        if self.admission is not None:
            lockouts.record_failure(self.admission)
        return super().get_invalid_login_error()


class ThrottledAuthenticationForm(ThrottledLoginMixin):
    """The dashboard's sign-in form."""


class ThrottledAdminAuthenticationForm(ThrottledLoginMixin, AdminAuthenticationForm):
    """The Django admin's sign-in form, under the same counters (no side door)."""


class ThrottledLoginView(auth_views.LoginView):
    form_class = ThrottledAuthenticationForm
    redirect_authenticated_user = True

    def form_invalid(self, form: AuthenticationForm) -> HttpResponse:
        response = super().form_invalid(form)
        throttled = getattr(form, "throttled", None)
        if throttled is not None:
            # 429 with Retry-After: scripts see they are being held back, and why.
            response.status_code = 429
            response["Retry-After"] = str(throttled.retry_after)
        return response


# as_view() keeps LoginView's login_not_required mark for LoginRequiredMiddleware.
login_view = ThrottledLoginView.as_view()
