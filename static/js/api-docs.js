// Starts Swagger UI from the settings the page embeds as JSON (no inline script, so the CSP holds).
(function () {
  "use strict";
  var settings = JSON.parse(document.getElementById("swagger-settings").textContent);
  settings.presets = [SwaggerUIBundle.presets.apis];
  settings.layout = "BaseLayout";
  // "Try it out" authenticates with the bearer token from "Authorize" only: never send cookies.
  settings.requestInterceptor = function (request) {
    request.credentials = "omit";
    return request;
  };
  window.ui = SwaggerUIBundle(settings);
})();
