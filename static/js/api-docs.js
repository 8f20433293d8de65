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
  // Likewise, once an operation is open: its example panels scroll, so they take focus
  // (keyboard users can scroll them), and its unlabelled example picker gets a name.
  function mend() {
    root.querySelectorAll("h3.opblock-tag:not([aria-level]), section.models > h4:not([aria-level])").forEach(function (tag) {
      tag.setAttribute("aria-level", "2");
    });
    root.querySelectorAll(".opblock h4:not([aria-level])").forEach(function (title) {
      title.setAttribute("aria-level", "3");
    });
    root.querySelectorAll("pre.microlight:not([tabindex])").forEach(function (pre) {
      pre.setAttribute("tabindex", "0");
    });
    root.querySelectorAll("select.examples-select-element:not([aria-label])").forEach(function (select) {
      select.setAttribute("aria-label", "Example");
    });
  }
  new MutationObserver(mend).observe(root, { childList: true, subtree: true });
})();
