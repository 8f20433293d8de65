// Copy buttons ({% copy_button %}): shown only when this runs, so a page without
// JavaScript shows no dead buttons. No inline handlers (the CSP forbids them).
(function () {
  "use strict";
  function wire(root) {
    root.querySelectorAll("button.btn-copy[data-copy]").forEach(function (button) {
      if (button.dataset.wired) return;
      button.dataset.wired = "1";
      button.hidden = false;
      button.addEventListener("click", function () {
        var done = function (text) {
          var label = button.textContent;
          button.textContent = text;
          setTimeout(function () { button.textContent = label; }, 1500);
        };
        if (navigator.clipboard && navigator.clipboard.writeText) {
          navigator.clipboard.writeText(button.dataset.copy).then(
            function () { done("Copied"); },
            function () { done("Select and copy"); }
          );
        } else {
          done("Select and copy");
        }
      });
    });
  }
  document.addEventListener("DOMContentLoaded", function () { wire(document); });
  document.addEventListener("htmx:afterSwap", function (event) { wire(event.target); });
})();
