// Runs in the browser: reloads the frame when the server says so.
window.addEventListener("message", (e) => {
  if (e.data === "reload") document.location.reload();
});
