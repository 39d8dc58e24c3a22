// Confirmation before a form that changes the cluster (data-confirm), and a refresh of the
// cluster page every 10 s while it is open (its TPS charts grow).
"use strict";
document.querySelectorAll("form[data-confirm]").forEach(function (form) {
  form.addEventListener("submit", function (event) {
    if (!window.confirm(form.dataset.confirm)) {
      event.preventDefault();
    }
  });
});
if (document.getElementById("brokers") && !document.getElementById("notice")) {
  window.setTimeout(function () { window.location.reload(); }, 10000);
}
