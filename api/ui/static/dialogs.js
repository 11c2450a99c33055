// Dialogs: native modal <dialog>s (the page behind is inert while one is
// open, so the keyboard stays in it; Escape closes it), with the focus
// given back to what opened them.

import { $ } from './dom.js';

// open shows dialog modally, focuses focus (or its first field), and
// gives the focus back to returnTo (by default what had it) on close: to
// that element, or, if a refresh has redrawn it meanwhile, to its
// successor with the same id or data-key.
export function open(dialog, { focus, returnTo } = {}) {
  const back = returnTo || document.activeElement;
  onClosed(dialog, () => {
    let el = back;
    if (el && !el.isConnected) {
      el = (el.id && document.getElementById(el.id))
        || (el.dataset && el.dataset.key && document.querySelector(`[data-key="${CSS.escape(el.dataset.key)}"]`));
    }
    if (el && typeof el.focus === 'function') el.focus();
  });
  dialog.showModal();
  const first = focus || dialog.querySelector('input:not([type=radio]), textarea, select, input:checked, button.primary');
  if (first) first.focus();
}

// onClosed calls fn once, when dialog next closes. A dialog's close event
// is dispatched after close() returns: one left from closing the dialog
// just before it was opened again reaches the listeners added meanwhile,
// and is not this opening's close (the dialog is open again when it
// arrives), so it is passed over.
function onClosed(dialog, fn) {
  const listener = () => {
    if (dialog.open) return;
    dialog.removeEventListener('close', listener);
    fn();
  };
  dialog.addEventListener('close', listener);
}

const FOCUSABLE = 'button:not([disabled]), input:not([disabled]), select:not([disabled]), textarea:not([disabled]), a[href]';

// wire sets every dialog up: its "Back"/"Not now" button closes it, and
// Tab and Shift+Tab cycle through its controls (a modal dialog makes the
// page behind it inert, but would let the focus leave for the browser).
export function wire() {
  for (const b of document.querySelectorAll('dialog button.close')) {
    b.addEventListener('click', () => b.closest('dialog').close());
  }
  for (const d of document.querySelectorAll('dialog')) {
    d.addEventListener('keydown', (ev) => {
      if (ev.key !== 'Tab') return;
      const all = [...d.querySelectorAll(FOCUSABLE)].filter((el) => el.offsetParent !== null);
      if (!all.length) return;
      const first = all[0];
      const last = all[all.length - 1];
      if (ev.shiftKey && document.activeElement === first) {
        ev.preventDefault();
        last.focus();
      } else if (!ev.shiftKey && document.activeElement === last) {
        ev.preventDefault();
        first.focus();
      }
    });
  }
}

export function showError(id, text) {
  const el = $(id);
  el.textContent = text || '';
  el.hidden = !text;
}

// confirm asks before an action: title and text say what will happen,
// label names the button. On confirmation it awaits run(); a refusal is
// shown in the dialog (its code and message), which stays open, so the
// person can read it, retry or go back. It resolves to run's result, or
// undefined when the person went back. onRefused(error) runs after a
// refusal (to show the state that refused it, say). field, when given
// ({label, hint, maxLength}), adds a text field to the dialog (empty
// each time it opens), and run is given its trimmed value. explain(error),
// when given, says what a refusal means (else its code and message).
export function confirm({ title, text, label, danger = true, run, returnTo, onRefused, field, explain }) {
  const dialog = $('confirm-dialog');
  const form = $('confirm-form');
  const ok = $('confirm-ok');
  const input = $('confirm-input');
  $('confirm-h').textContent = title;
  $('confirm-text').textContent = text;
  $('confirm-field').hidden = !field;
  input.value = '';
  if (field) {
    $('confirm-label').textContent = field.label;
    $('confirm-hint').textContent = field.hint || '';
    input.maxLength = field.maxLength || 1024;
  }
  ok.textContent = label;
  ok.className = danger ? 'danger' : 'primary';
  ok.disabled = false;
  showError('confirm-error', '');
  return new Promise((resolve) => {
    let result;
    const submit = async (ev) => {
      ev.preventDefault();
      if (ok.disabled) return;
      ok.disabled = true;
      showError('confirm-error', '');
      try {
        result = await run(field ? input.value.trim() : undefined);
        dialog.close();
      } catch (e) {
        const why = explain ? explain(e) : (e.describe ? e.describe() : e.message);
        showError('confirm-error', `${label} was refused. ${why}`);
        ok.disabled = false;
        if (onRefused) onRefused(e);
      }
    };
    form.addEventListener('submit', submit);
    onClosed(dialog, () => {
      form.removeEventListener('submit', submit);
      resolve(result);
    });
    open(dialog, { focus: field ? input : $('confirm-dialog').querySelector('button.close'), returnTo });
  });
}
