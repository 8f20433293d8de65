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
  // Swagger UI titles the page with an h1 and each group of operations with an h3; with no
  // h2 between them, screen-reader heading navigation skips a level. Announce the groups as
  // level 2 (and the "Schemas" h4 with them) as Swagger renders them (it re-renders when a group is opened or closed).
  var root = document.getElementById("swagger-ui");
  function levelTags() {
    root.querySelectorAll("h3.opblock-tag:not([aria-level]), section.models > h4:not([aria-level])").forEach(function (tag) {
      tag.setAttribute("aria-level", "2");
    });
  }
  new MutationObserver(levelTags).observe(root, { childList: true, subtree: true });
})();
