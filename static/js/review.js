// Review queue at volume: a live count of ticked records, tick/untick all on the
// page, and keyboard shortcuts for clearing a queue. The page works without this
// (the "Tick all" link reloads the page with every box ticked); no inline
// handlers, as the CSP forbids them.
(function () {
  "use strict";
  function boxes() {
    return Array.prototype.slice.call(
      document.querySelectorAll('input[type="checkbox"][name="items"][form="bulk-form"]')
    );
  }
  function count() {
    var out = document.getElementById("ticked-count");
    if (!out) return;
    var n = boxes().filter(function (box) { return box.checked; }).length;
    out.textContent = String(n);
    var untick = document.getElementById("untick-all");
    if (untick) untick.hidden = n === 0;
  }
  function setAll(on) {
    boxes().forEach(function (box) { box.checked = on; });
    count();
  }
  // The cards (one fact) and the facts of a grouped card, in page order.
  function stops() {
    return Array.prototype.slice.call(
      document.querySelectorAll("article.review-item:not(.review-group), .source-fact")
    );
  }
  var current = -1;
  function focusStop(index) {
    var all = stops();
    if (!all.length) return;
    current = Math.max(0, Math.min(all.length - 1, index));
    all.forEach(function (el) { el.classList.remove("key-current"); });
    var el = all[current];
    el.classList.add("key-current");
    el.setAttribute("tabindex", "-1");
    el.focus({ preventScroll: true });
    el.scrollIntoView({ block: "nearest" });
  }
  function decide(value) {
    var el = stops()[current];
    if (!el) return;
    if (el.classList.contains("source-fact")) {
      // A fact of a grouped source: choose for it, then move on; the group's
      // button decides them together.
      var radio = el.querySelector('input[type="radio"][value="' + value + '"]');
      if (radio) radio.checked = true;
      focusStop(current + 1);
      return;
    }
    var reason = el.querySelector("textarea[name=reason]");
    if (reason && !reason.value.trim()) {
      reason.focus();
      reason.setAttribute("aria-invalid", "true");
      reason.placeholder = "Give a reason, then press " + (value === "promote" ? "Promote" : "Reject");
      return;
    }
    var button = el.querySelector('button[data-key="' + value + '"]');
    if (button) button.click();
  }
  function typing(target) {
    var tag = (target && target.tagName) || "";
    return tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT" || (target && target.isContentEditable);
  }
  document.addEventListener("DOMContentLoaded", function () {
    if (!document.getElementById("bulk-form")) return;
    var hint = document.getElementById("shortcuts-hint");
    if (hint) hint.hidden = false;
    var tickPage = document.getElementById("tick-page");
    if (tickPage) {
      tickPage.addEventListener("click", function (event) {
        event.preventDefault();
        setAll(true);
      });
    }
    var untick = document.getElementById("untick-all");
    if (untick) untick.addEventListener("click", function () { setAll(false); });
    document.addEventListener("change", function (event) {
      if (event.target && event.target.name === "items") count();
    });
    document.addEventListener("keydown", function (event) {
      if (event.ctrlKey || event.metaKey || event.altKey || typing(event.target)) return;
      var key = event.key;
      if (key === "j") { focusStop(current + 1); }
      else if (key === "k") { focusStop(current - 1); }
      else if (key === "x") {
        var el = stops()[current];
        var box = el && el.querySelector('input[name="items"]');
        if (box) { box.checked = !box.checked; count(); }
      }
      else if (key === "p") { decide("promote"); }
      else if (key === "r") { decide("reject"); }
      else { return; }
      event.preventDefault();
    });
    count();
  });
})();
