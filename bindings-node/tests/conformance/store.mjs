// Area `store`: `session` vectors on the hub side with the store's inputs (`rows`,
// `writes`, `from_rows`, `close_for`) and expectations (`rows`, `writes`, `close`,
// `error`), run by the session runner (as the core's runner does).
export { run } from './session.mjs';
