// Package cmderr is the command error mongosim's engines return: a MongoDB
// error code, its codeName, a message and optional error labels, rendered by
// the server as {ok: 0, errmsg, code, codeName, errorLabels}.
package cmderr
