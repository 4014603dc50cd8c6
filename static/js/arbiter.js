/* Arbiter: small progressive enhancements. Every page works without this file. */
(function () {
  "use strict";

  // The proposal form shows only the fields of the kind of change chosen (all show without JS).
  function syncProposalForm(form) {
    var checked = form.querySelector("input[name=kind]:checked");
    var kind = checked ? checked.value : "";
    form.querySelectorAll("[data-kind]").forEach(function (block) {
      block.hidden = kind !== "" && block.getAttribute("data-kind") !== kind;
    });
  }

  function enhance(root) {
    root.querySelectorAll("form[data-proposal-form]").forEach(function (form) {
      syncProposalForm(form);
      form.addEventListener("change", function () { syncProposalForm(form); });
    });
    // A refusal answered in place takes the focus, so keyboard and screen-reader users hear it.
    var refusal = root.querySelector ? root.querySelector("#action-error") : null;
    if (refusal && root !== document) { refusal.focus({ preventScroll: true }); }
    // After an htmx action the changed item's message (or the item) takes the focus (issue 8).
    if (root !== document && root.querySelector) {
      var target = root.matches && root.matches("[data-focus-after-swap]") ? root
        : root.querySelector("[data-focus-after-swap]");
      if (target && !refusal) { target.focus({ preventScroll: false }); }
    }
  }

  // The main navigation collapses behind a Menu button on narrow screens (CSS decides when).
  function enhanceNav() {
    document.querySelectorAll(".nav").forEach(function (nav) {
      var toggle = nav.querySelector(".nav-toggle");
      if (!toggle || nav.classList.contains("js-nav")) { return; }
      nav.classList.add("js-nav");
      toggle.hidden = false;
      toggle.addEventListener("click", function () {
        var open = nav.classList.toggle("is-open");
        toggle.setAttribute("aria-expanded", open ? "true" : "false");
      });
    });
  }

  var banner = function () { return document.getElementById("request-error"); };
  document.addEventListener("DOMContentLoaded", function () { enhance(document); enhanceNav(); });
  document.addEventListener("htmx:load", function (event) { enhance(event.detail.elt); });
  document.addEventListener("htmx:beforeRequest", function () { var b = banner(); if (b) { b.hidden = true; } });
  // 4xx answers are swapped in place (see the htmx-config meta); only 5xx and network failures land here.
  document.addEventListener("htmx:responseError", function () { var b = banner(); if (b) { b.hidden = false; } });
  document.addEventListener("htmx:sendError", function () { var b = banner(); if (b) { b.hidden = false; } });
})();
