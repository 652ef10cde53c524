// The node and workflow pages' MAAS diagnostics, loaded after the page shows (a slow MAAS never
// blocks it). A file, not an inline script: the admin pages' Content-Security-Policy allows
// scripts from this origin only (docs/security.md, T20).
(function () {
  var box = document.getElementById("wf-diagnostics");
  if (!box || !box.dataset.url) { return; }
  box.innerHTML = "<p>Loading diagnostics from MAAS&hellip;</p>";
  fetch(box.dataset.url, {credentials: "same-origin"})
    .then(function (r) { return r.text(); })
    .then(function (html) { box.innerHTML = html; box.setAttribute("data-loaded", "1"); })
    .catch(function (e) {
      box.textContent = "Could not load diagnostics: " + e;
      box.setAttribute("data-loaded", "1");
    });
})();
