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

  // After an htmx action a person took (a click or a submit, not a poll), the focus moves to what
  // changed: an element marked data-focus-after-swap, else the message the action left in #flash,
  // else the swapped region itself. A refusal (#action-error) takes it in enhance() above.
  document.addEventListener("htmx:afterSettle", function (event) {
    var config = event.detail && event.detail.requestConfig;
    var trigger = config && config.triggeringEvent;
    if (!trigger || (trigger.type !== "submit" && trigger.type !== "click")) { return; }
    var target = event.detail.target;
    if (document.getElementById("action-error")) { return; }
    // The review workspace places the focus itself (static/js/keys.js): back in its list.
    if (target && target.closest && target.closest("[data-review-workspace], #review-pane")) { return; }
    var marked = document.querySelector("[data-focus-after-swap]");
    var flash = document.querySelector("#flash .flash");
    var next = marked || flash || (target && target.id ? target : null);
    if (!next) { return; }
    if (!next.hasAttribute("tabindex")) { next.setAttribute("tabindex", "-1"); }
    next.focus({ preventScroll: !!flash && !marked });
    if (marked) { marked.removeAttribute("data-focus-after-swap"); }
  });

  // A page opened on a cited quote (?quote=… from a proposal card, without htmx) focuses the quote.
  function focusQuoteOnLoad() {
    var mark = document.getElementById("quote-mark");
    if (!mark || !mark.hasAttribute("data-focus-after-swap")) { return; }
    mark.removeAttribute("data-focus-after-swap");
    mark.focus();
  }

  var banner = function () { return document.getElementById("request-error"); };
  document.addEventListener("DOMContentLoaded", function () { enhance(document); enhanceNav(); focusQuoteOnLoad(); });
  document.addEventListener("htmx:load", function (event) { enhance(event.detail.elt); });
  document.addEventListener("htmx:beforeRequest", function () { var b = banner(); if (b) { b.hidden = true; } });
  // 4xx answers are swapped in place (see the htmx-config meta); only 5xx and network failures land here.
  document.addEventListener("htmx:responseError", function () { var b = banner(); if (b) { b.hidden = false; } });
  document.addEventListener("htmx:sendError", function () { var b = banner(); if (b) { b.hidden = false; } });
})();
