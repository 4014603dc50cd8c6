/* Arbiter: keyboard shortcuts. Every one is also a visible control (a button, a link, a form), so
   nothing here is the only way to do anything; the list of them opens with "?".

   Everywhere: ? the list of shortcuts, g then i the review inbox, / search (the page's own list
   search where it has one, else the search of all cases in the top bar).
   In the review workspace: j / k next / previous item (shown in the reading pane, the focus stays in
   the list), Enter read it (the focus moves into the pane), a approve (its form opens, Enter
   confirms), r reject (type the reason, Enter), o open the case, / search, Esc back to the list. */
(function () {
  "use strict";

  var pendingG = 0;
  // While a decision is on its way, the item in the pane is the one being decided: keys wait for
  // the answer rather than act on it a second time.
  var deciding = false;

  function typing(target) {
    if (!target || !target.tagName) { return false; }
    var tag = target.tagName.toLowerCase();
    return tag === "input" || tag === "textarea" || tag === "select" || target.isContentEditable;
  }

  function workspace() { return document.querySelector("[data-review-workspace]"); }
  function rows() { return Array.prototype.slice.call(document.querySelectorAll(".review-row")); }
  function selectedRow() { return document.querySelector(".review-row.is-selected"); }
  function rowLink(row) { return row ? row.querySelector("[data-row-link]") : null; }

  function markSelected(row) {
    rows().forEach(function (other) {
      other.classList.toggle("is-selected", other === row);
      var link = rowLink(other);
      if (link) {
        if (other === row) { link.setAttribute("aria-current", "true"); } else { link.removeAttribute("aria-current"); }
      }
    });
  }

  // Select the row `delta` away from the selected one: it is shown in the pane (the row link's own
  // htmx request), and the focus stays on it in the list.
  function move(delta) {
    var all = rows();
    if (!all.length) { return; }
    var index = all.indexOf(selectedRow());
    var next = all[Math.min(all.length - 1, Math.max(0, index < 0 ? 0 : index + delta))];
    if (!next || (next === selectedRow() && index >= 0)) { focusList(); return; }
    markSelected(next);
    var link = rowLink(next);
    link.focus();
    link.click();
  }

  function focusList() {
    var link = rowLink(selectedRow()) || rowLink(rows()[0]);
    if (link) { link.focus(); }
  }

  // Open the approve or reject form of the selected item and put the focus where the next key
  // belongs: the first thing to type (a reason), else the confirm button.
  function openDecision(kind) {
    var pane = document.getElementById("review-pane");
    var details = pane && pane.querySelector('details[data-decide="' + kind + '"]');
    if (!details) { return false; }
    pane.querySelectorAll("details[data-decide]").forEach(function (other) { other.open = other === details; });
    // A key pressed right after a swap may come before htmx has wired the new form: wire it now
    // (idempotent), so Enter posts it in place rather than as a page load.
    if (window.htmx) { window.htmx.process(details); }
    var first = details.querySelector("[data-decide-first]") || details.querySelector("[data-decide-submit]");
    if (first) { first.focus(); }
    return true;
  }

  function closeDecisions() {
    var pane = document.getElementById("review-pane");
    if (!pane) { return; }
    pane.querySelectorAll("details[open]").forEach(function (details) { details.open = false; });
  }

  function openHelp() {
    var dialog = document.getElementById("shortcut-help");
    if (!dialog || dialog.open) { return; }
    dialog.showModal();
    var close = dialog.querySelector("button");
    if (close) { close.focus(); }
  }

  function goInbox() {
    var link = document.querySelector('.nav a[href$="/review/"]');
    if (link) { window.location.assign(link.href); }
  }

  function onWorkspaceKey(event, key) {
    var target = event.target;
    if (key === "j" || key === "k") { move(key === "j" ? 1 : -1); return true; }
    if (key === "/") {
      var search = document.querySelector("[data-inbox-search]");
      if (search) { search.focus(); search.select(); return true; }
      return false;
    }
    if (key === "a") { return openDecision("approve"); }
    if (key === "r") { return openDecision("reject"); }
    if (key === "o") {
      var open = document.querySelector('#review-pane [data-shortcut="o"]');
      if (open) { open.click(); return true; }
      return false;
    }
    if (key === "Enter" && target && target.matches && target.matches("[data-row-link]")
        && target.closest(".review-row") === selectedRow()) {
      var pane = document.getElementById("review-pane");
      if (pane) { pane.focus(); return true; }
    }
    return false;
  }

  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey) { return; }
    var key = event.key;
    if (key === "Escape") {
      if (workspace() && (typing(event.target) || document.querySelector("#review-pane details[open]")
                          || (event.target && event.target.closest && event.target.closest("#review-pane")))) {
        closeDecisions();
        focusList();
        event.preventDefault();
      }
      return;
    }
    if (typing(event.target) || (document.getElementById("shortcut-help") || {}).open) { return; }
    if (key === "?") { openHelp(); event.preventDefault(); return; }
    if (pendingG && key === "i") { pendingG = 0; goInbox(); event.preventDefault(); return; }
    pendingG = 0;
    if (key === "g") { pendingG = window.setTimeout(function () { pendingG = 0; }, 1500); return; }
    if (deciding && workspace()) { event.preventDefault(); return; }
    if (workspace() && onWorkspaceKey(event, key)) { event.preventDefault(); return; }
    if (key === "/") {
      var box = document.querySelector("[data-list-search]") || document.querySelector("[data-global-search]");
      if (box) { box.focus(); box.select(); event.preventDefault(); }
    }
  });

  document.addEventListener("click", function (event) {
    var target = event.target;
    if (!target || !target.closest) { return; }
    if (target.closest("[data-shortcut-help]")) { openHelp(); return; }
    var step = target.closest('.list-controls [data-shortcut="j"], .list-controls [data-shortcut="k"]');
    if (step && workspace()) {
      event.preventDefault();
      move(step.getAttribute("data-shortcut") === "j" ? 1 : -1);
      return;
    }
    var chosen = target.closest("[data-row-link], [data-row-review]");
    if (chosen) { markSelected(chosen.closest(".review-row")); }
  }, true);

  document.addEventListener("htmx:beforeRequest", function (event) {
    var target = event.detail && event.detail.target;
    if (target && target.id === "workspace") { deciding = true; }
  });
  ["htmx:afterSwap", "htmx:responseError", "htmx:sendError"].forEach(function (name) {
    document.addEventListener(name, function (event) {
      var target = event.detail && event.detail.target;
      if (target && target.id === "workspace") { deciding = false; }
    });
  });

  // A row chosen with the phone's Review button: its pane is below the list, so it comes into view.
  document.addEventListener("htmx:afterSwap", function (event) {
    var config = event.detail && event.detail.requestConfig;
    var source = config && config.elt;
    if (event.detail.target && event.detail.target.id === "review-pane" && source && source.matches
        && source.matches("[data-row-review]")) {
      event.detail.target.scrollIntoView({ block: "start" });
      event.detail.target.focus({ preventScroll: true });
    }
  });

  // After a decision the whole workspace is swapped: the focus goes back to the list, on the row
  // now selected (the next one), so the next key acts on it.
  document.addEventListener("htmx:afterSettle", function (event) {
    var target = event.detail && event.detail.target;
    var config = event.detail && event.detail.requestConfig;
    var source = config && config.elt;
    // A row shown in the pane (j/k or a click on it): the focus stays on the row, in the list.
    if (target && target.id === "review-pane" && source && source.matches && source.matches("[data-row-link]")) {
      // A key pressed between the swap and its settling (a fast "a") already opened a decision in
      // the pane and focused it: leave the focus there, or the next Enter would act on the row.
      var pane = document.getElementById("review-pane");
      if (pane && pane.contains(document.activeElement) && pane.querySelector("details[data-decide][open]")) {
        return;
      }
      source.focus({ preventScroll: true });
      return;
    }
    if (!target || target.id !== "workspace") { return; }
    // A key pressed between the swap and now (a fast "a") already put the focus somewhere in the
    // new workspace: leave it there. Otherwise the focused element was swapped out: back to the list.
    // (The event's target is the swapped-out element; the new one is looked up by id.)
    var fresh = document.getElementById("workspace");
    var active = document.activeElement;
    if (fresh && active && active !== document.body && active !== fresh && fresh.contains(active)) { return; }
    var said = document.querySelector("#workspace [data-said]");
    focusList();
    if (!selectedRow() && said) { said.setAttribute("tabindex", "-1"); said.focus(); }
  });
})();
