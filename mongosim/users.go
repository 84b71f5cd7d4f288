package mongosim

import (
	"encoding/base64"
	"slices"
	"sort"

	"github.com/xdg-go/scram"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/mongosim/internal/cmderr"
	"github.com/sturdy-go/sturdy/mongosim/internal/query"
)

// User management: createUser, updateUser, dropUser,
// dropAllUsersFromDatabase and usersInfo, with SCRAM credentials the
// users then authenticate with. mongosim does not enforce roles: every
// authenticated user may run every command (COMPATIBILITY.md).

// mongod's codes for user management.
const (
	codeUserNotFound = 11
	codeRoleNotFound = 31
	codeUserExists   = 51003
)

func userErr(code int32, name, format string, args ...any) error {
	e := cmderr.New(code, format, args...)
	e.Name = name
	return e
}

// builtinRoles are mongod's built-in roles; the true ones exist only on
// the admin database.
var builtinRoles = map[string]bool{
	"read": false, "readWrite": false, "dbAdmin": false, "dbOwner": false, "userAdmin": false,
	"enableSharding": false,
	"clusterAdmin":   true, "clusterManager": true, "clusterMonitor": true, "hostManager": true,
	"backup": true, "restore": true, "readAnyDatabase": true, "readWriteAnyDatabase": true,
	"userAdminAnyDatabase": true, "dbAdminAnyDatabase": true, "root": true, "__system": true,
	"directShardOperations": true, "searchCoordinator": true,
}

// parseRoles validates a roles array: role names (on db) or {role, db}.
func parseRoles(field string, v any, db string) (bson.A, error) {
	a, ok := v.(bson.A)
	if !ok {
		return nil, typeErr(field, "array", v)
	}
	out := bson.A{}
	for _, x := range a {
		var role, rdb string
		switch t := x.(type) {
		case string:
			role, rdb = t, db
		case bson.D:
			rv, _ := lookupD(t, "role")
			dv, _ := lookupD(t, "db")
			role, _ = rv.(string)
			rdb, _ = dv.(string)
			if role == "" || rdb == "" {
				return nil, cmderr.New(cmderr.BadValue, "role names must have a non-empty 'role' and 'db' field")
			}
		default:
			return nil, cmderr.New(cmderr.BadValue, "Role names must be either strings or objects")
		}
		adminOnly, ok := builtinRoles[role]
		if !ok || (adminOnly && rdb != "admin") {
			return nil, userErr(codeRoleNotFound, "RoleNotFound", "Could not find role: %s@%s", role, rdb)
		}
		out = append(out, bson.D{{Key: "role", Value: role}, {Key: "db", Value: rdb}})
	}
	return out, nil
}

// parseMechanisms validates mechanisms; nil means both SCRAM mechanisms.
func parseMechanisms(v any, present bool) ([]string, error) {
	if !present {
		return []string{mechSHA1, mechSHA256}, nil
	}
	a, ok := v.(bson.A)
	if !ok {
		return nil, typeErr("mechanisms", "array", v)
	}
	if len(a) == 0 {
		return nil, cmderr.New(cmderr.BadValue, "mechanisms field must not be empty")
	}
	var out []string
	for _, x := range a {
		s, _ := x.(string)
		if s != mechSHA1 && s != mechSHA256 {
			return nil, cmderr.New(cmderr.BadValue, "Unknown auth mechanism '%v'", x)
		}
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out, nil
}

func userArgs(r *request, allowed ...string) (string, error) {
	if err := checkFields(r, allowed...); err != nil {
		return "", err
	}
	v := r.cmd[0].Value
	name, ok := v.(string)
	if !ok {
		return "", typeErr(r.name, "string", v)
	}
	if name == "" {
		return "", cmderr.New(cmderr.BadValue, "User name must not be empty")
	}
	if r.db == "local" {
		return "", cmderr.New(cmderr.BadValue, "Cannot create users in the local database")
	}
	if r.db == "$external" {
		return "", cmderr.Unsupported("users on $external")
	}
	return name, nil
}

// primaryOnly refuses user writes on a secondary, as mongod does.
func primaryOnly(r *request) error {
	if !r.member.IsPrimary() {
		return cmderr.New(cmderr.NotWritablePrimary, notPrimaryMessage)
	}
	return nil
}

func cmdCreateUser(r *request) (bson.D, error) {
	name, err := userArgs(r, "pwd", "customData", "roles", "mechanisms", "digestPassword", "authenticationRestrictions")
	if err != nil {
		return nil, err
	}
	if err := primaryOnly(r); err != nil {
		return nil, err
	}
	rv, ok := r.get("roles")
	if !ok {
		return nil, cmderr.New(cmderr.NoSuchKey, "BSON field 'createUser.roles' is missing but a required field")
	}
	roles, err := parseRoles("createUser.roles", rv, r.db)
	if err != nil {
		return nil, err
	}
	pv, hasPwd := r.get("pwd")
	pwd, ok := pv.(string)
	if !hasPwd {
		return nil, cmderr.New(cmderr.BadValue, "Must provide a 'pwd' field for all user documents, except those with '$external' as the user's source db")
	}
	if !ok {
		return nil, typeErr("createUser.pwd", "string", pv)
	}
	if pwd == "" {
		return nil, cmderr.New(cmderr.BadValue, "User passwords must not be empty")
	}
	if v, ok := r.get("digestPassword"); ok && !asBool(v) {
		return nil, cmderr.Unsupported("createUser with digestPassword: false")
	}
	mv, hasMechs := r.get("mechanisms")
	mechs, err := parseMechanisms(mv, hasMechs)
	if err != nil {
		return nil, err
	}
	custom, _, err := docArg(r, "customData")
	if err != nil {
		return nil, err
	}
	creds, err := deriveCredentials(name, pwd, mechs)
	if err != nil {
		return nil, err
	}
	u := &simUser{name: name, db: r.db, id: bson.Binary{Subtype: 4, Data: randomUUID()}, roles: roles, customData: custom, mechs: mechs, creds: creds}
	u.once.Do(func() {}) // credentials are derived
	a := r.cluster.adm.users
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.users[r.db+"."+name] != nil {
		return nil, userErr(codeUserExists, "Location51003", "User \"%s@%s\" already exists", name, r.db)
	}
	a.users[r.db+"."+name] = u
	return okReply(), nil
}

func cmdUpdateUser(r *request) (bson.D, error) {
	name, err := userArgs(r, "pwd", "customData", "roles", "mechanisms", "digestPassword", "authenticationRestrictions")
	if err != nil {
		return nil, err
	}
	if err := primaryOnly(r); err != nil {
		return nil, err
	}
	a := r.cluster.adm.users
	old := a.lookup(r.db, name)
	if old == nil {
		return nil, userErr(codeUserNotFound, "UserNotFound", "Could not find user \"%s\" for db \"%s\"", name, r.db)
	}
	if _, err := old.credentials(); err != nil {
		return nil, err
	}
	u := &simUser{name: old.name, db: old.db, id: old.id, roles: old.roles, customData: old.customData, mechs: old.mechs, creds: old.creds}
	u.once.Do(func() {})
	changed := false
	if rv, ok := r.get("roles"); ok {
		if u.roles, err = parseRoles("updateUser.roles", rv, r.db); err != nil {
			return nil, err
		}
		changed = true
	}
	if v, ok := r.get("customData"); ok {
		d, isDoc := v.(bson.D)
		if !isDoc {
			return nil, typeErr("updateUser.customData", "object", v)
		}
		u.customData, changed = d, true
	}
	mv, hasMechs := r.get("mechanisms")
	if hasMechs {
		mechs, err := parseMechanisms(mv, true)
		if err != nil {
			return nil, err
		}
		u.mechs, changed = mechs, true
	}
	if pv, ok := r.get("pwd"); ok {
		pwd, isStr := pv.(string)
		if !isStr {
			return nil, typeErr("updateUser.pwd", "string", pv)
		}
		if pwd == "" {
			return nil, cmderr.New(cmderr.BadValue, "User passwords must not be empty")
		}
		if !hasMechs {
			u.mechs = []string{mechSHA1, mechSHA256}
		}
		if u.creds, err = deriveCredentials(name, pwd, u.mechs); err != nil {
			return nil, err
		}
		changed = true
	} else if hasMechs {
		// Without a new password the mechanisms may only shrink: there is
		// no password to derive new credentials from.
		kept := map[string]scram.StoredCredentials{}
		for _, m := range u.mechs {
			c, ok := old.creds[m]
			if !ok {
				return nil, cmderr.New(cmderr.BadValue, "mechanisms field must be a subset of previously set mechanisms")
			}
			kept[m] = c
		}
		u.creds = kept
	}
	if !changed {
		return nil, cmderr.New(cmderr.BadValue, "Must specify at least one field to update in updateUser")
	}
	a.mu.Lock()
	a.users[r.db+"."+name] = u
	a.mu.Unlock()
	return okReply(), nil
}

func cmdDropUser(r *request) (bson.D, error) {
	name, err := userArgs(r)
	if err != nil {
		return nil, err
	}
	if err := primaryOnly(r); err != nil {
		return nil, err
	}
	a := r.cluster.adm.users
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.users[r.db+"."+name] == nil {
		return nil, userErr(codeUserNotFound, "UserNotFound", "Could not find user \"%s\" for db \"%s\"", name, r.db)
	}
	delete(a.users, r.db+"."+name)
	return okReply(), nil
}

func cmdDropAllUsersFromDatabase(r *request) (bson.D, error) {
	if err := checkFields(r); err != nil {
		return nil, err
	}
	if err := primaryOnly(r); err != nil {
		return nil, err
	}
	a := r.cluster.adm.users
	a.mu.Lock()
	defer a.mu.Unlock()
	n := int32(0)
	for k, u := range a.users {
		if u.db == r.db {
			delete(a.users, k)
			n++
		}
	}
	return bson.D{{Key: "n", Value: n}, {Key: "ok", Value: 1.0}}, nil
}

// cmdUsersInfo: {usersInfo: 1 | "name" | {user, db} | [...] | {forAllDBs:
// true}, showCredentials, showCustomData, showPrivileges, filter}.
func cmdUsersInfo(r *request) (bson.D, error) {
	if err := checkFields(r, "showCredentials", "showCustomData", "showPrivileges", "showAuthenticationRestrictions", "filter"); err != nil {
		return nil, err
	}
	showCreds, showCustom := false, true
	if v, ok := r.get("showCredentials"); ok {
		showCreds = asBool(v)
	}
	if v, ok := r.get("showCustomData"); ok {
		showCustom = asBool(v)
	}
	if v, ok := r.get("showPrivileges"); ok && asBool(v) {
		return nil, cmderr.Unsupported("usersInfo with showPrivileges")
	}
	filterDoc, _, err := docArg(r, "filter")
	if err != nil {
		return nil, err
	}
	f, err := query.CompileFilter(filterDoc)
	if err != nil {
		return nil, err
	}
	want, err := usersInfoSelector(r.db, r.cmd[0].Value)
	if err != nil {
		return nil, err
	}
	a := r.cluster.adm.users
	a.mu.Lock()
	users := make([]*simUser, 0, len(a.users))
	for _, u := range a.users {
		if want(u) {
			users = append(users, u)
		}
	}
	a.mu.Unlock()
	sort.Slice(users, func(i, j int) bool { return users[i].db+"."+users[i].name < users[j].db+"."+users[j].name })
	out := bson.A{}
	for _, u := range users {
		d, err := userInfoDoc(u, showCustom, showCreds)
		if err != nil {
			return nil, err
		}
		if len(filterDoc) > 0 && !f.Match(d) {
			continue
		}
		out = append(out, d)
	}
	return bson.D{{Key: "users", Value: out}, {Key: "ok", Value: 1.0}}, nil
}

// usersInfoSelector turns usersInfo's argument (1, a name, a {user, db}
// document, an array of those, or {forAllDBs: true}) into a predicate
// reporting whether a user is asked for.
func usersInfoSelector(db string, v any) (func(u *simUser) bool, error) {
	named := func(names []string) func(u *simUser) bool {
		return func(u *simUser) bool { return slices.Contains(names, u.db+"."+u.name) }
	}
	switch t := v.(type) {
	case bson.D:
		if fv, ok := lookupD(t, "forAllDBs"); ok {
			if !asBool(fv) {
				return nil, cmderr.New(cmderr.BadValue, "forAllDBs must be true")
			}
			return func(*simUser) bool { return true }, nil
		}
		name, err := usersInfoName(db, t)
		if err != nil {
			return nil, err
		}
		return named([]string{name}), nil
	case bson.A:
		var names []string
		for _, x := range t {
			name, err := usersInfoName(db, x)
			if err != nil {
				return nil, err
			}
			names = append(names, name)
		}
		return named(names), nil
	case string:
		return named([]string{db + "." + t}), nil
	default:
		if n, ok := asInt64(v); ok && n == 1 {
			return func(u *simUser) bool { return u.db == db }, nil
		}
		return nil, cmderr.New(cmderr.BadValue, "User and role names must be either strings or objects")
	}
}

// usersInfoName returns the "db.user" a usersInfo name or {user, db}
// document names; a bare name is in the command's database.
func usersInfoName(db string, x any) (string, error) {
	switch t := x.(type) {
	case string:
		return db + "." + t, nil
	case bson.D:
		uv, _ := lookupD(t, "user")
		dv, _ := lookupD(t, "db")
		us, ok1 := uv.(string)
		ds, ok2 := dv.(string)
		if !ok1 || !ok2 {
			return "", cmderr.New(cmderr.BadValue, "User name must contain a string field named: user and db")
		}
		return ds + "." + us, nil
	}
	return "", cmderr.New(cmderr.BadValue, "User name must be either a string or an object")
}

// userInfoDoc is one user's entry in the usersInfo reply.
func userInfoDoc(u *simUser, showCustom, showCreds bool) (bson.D, error) {
	d := bson.D{
		{Key: "_id", Value: u.db + "." + u.name},
		{Key: "userId", Value: u.id},
		{Key: "user", Value: u.name},
		{Key: "db", Value: u.db},
	}
	if showCustom && u.customData != nil {
		d = append(d, bson.E{Key: "customData", Value: u.customData})
	}
	d = append(d, bson.E{Key: "roles", Value: u.roles})
	if showCreds {
		cd, err := userCredentialsDoc(u)
		if err != nil {
			return nil, err
		}
		d = append(d, bson.E{Key: "credentials", Value: cd})
	}
	mechs := bson.A{}
	for _, m := range u.mechs {
		mechs = append(mechs, m)
	}
	return append(d, bson.E{Key: "mechanisms", Value: mechs}), nil
}

// userCredentialsDoc is the credentials document usersInfo shows with
// showCredentials: one SCRAM entry per mechanism.
func userCredentialsDoc(u *simUser) (bson.D, error) {
	creds, err := u.credentials()
	if err != nil {
		return nil, err
	}
	var cd bson.D
	for _, m := range u.mechs {
		c := creds[m]
		cd = append(cd, bson.E{Key: m, Value: bson.D{
			{Key: "iterationCount", Value: int32(c.Iters)},
			{Key: "salt", Value: base64.StdEncoding.EncodeToString([]byte(c.Salt))},
			{Key: "storedKey", Value: base64.StdEncoding.EncodeToString(c.StoredKey)},
			{Key: "serverKey", Value: base64.StdEncoding.EncodeToString(c.ServerKey)},
		}})
	}
	return cd, nil
}

// cmdRolesInfo lists roles: mongosim has only the built-in ones, listed
// with showBuiltinRoles (rolesInfo: 1) or by name.
func cmdRolesInfo(r *request) (bson.D, error) {
	if err := checkFields(r, "showBuiltinRoles", "showPrivileges", "showAuthenticationRestrictions"); err != nil {
		return nil, err
	}
	if v, ok := r.get("showPrivileges"); ok && asBool(v) {
		return nil, cmderr.Unsupported("rolesInfo with showPrivileges")
	}
	builtin := false
	if v, ok := r.get("showBuiltinRoles"); ok {
		builtin = asBool(v)
	}
	role := func(name, db string) bson.D {
		return bson.D{
			{Key: "_id", Value: db + "." + name}, {Key: "role", Value: name}, {Key: "db", Value: db},
			{Key: "isBuiltin", Value: true}, {Key: "roles", Value: bson.A{}}, {Key: "inheritedRoles", Value: bson.A{}},
		}
	}
	exists := func(name, db string) bool {
		adminOnly, ok := builtinRoles[name]
		return ok && (!adminOnly || db == "admin")
	}
	var names []string
	for n := range builtinRoles {
		names = append(names, n)
	}
	sort.Strings(names)
	out := bson.A{}
	want := func(x any) error {
		switch t := x.(type) {
		case string:
			if exists(t, r.db) {
				out = append(out, role(t, r.db))
			}
		case bson.D:
			rv, _ := lookupD(t, "role")
			dv, _ := lookupD(t, "db")
			rs, ok1 := rv.(string)
			ds, ok2 := dv.(string)
			if !ok1 || !ok2 {
				return cmderr.New(cmderr.BadValue, "Role name must contain a string field named: role and db")
			}
			if exists(rs, ds) {
				out = append(out, role(rs, ds))
			}
		default:
			return cmderr.New(cmderr.BadValue, "Role names must be either strings or objects")
		}
		return nil
	}
	switch v := r.cmd[0].Value.(type) {
	case bson.A:
		for _, x := range v {
			if err := want(x); err != nil {
				return nil, err
			}
		}
	case string, bson.D:
		if err := want(v); err != nil {
			return nil, err
		}
	default:
		if n, ok := asInt64(v); !ok || n != 1 {
			return nil, cmderr.New(cmderr.BadValue, "Role names must be either strings or objects")
		}
		if builtin {
			for _, n := range names {
				if exists(n, r.db) {
					out = append(out, role(n, r.db))
				}
			}
		}
	}
	return bson.D{{Key: "roles", Value: out}, {Key: "ok", Value: 1.0}}, nil
}

func init() {
	register(
		&command{name: "rolesInfo", run: cmdRolesInfo},
		&command{name: "createRole", run: unsupportedCmd("user-defined roles (createRole)")},
		&command{name: "createUser", run: cmdCreateUser},
		&command{name: "updateUser", run: cmdUpdateUser},
		&command{name: "dropUser", run: cmdDropUser},
		&command{name: "dropAllUsersFromDatabase", run: cmdDropAllUsersFromDatabase},
		&command{name: "usersInfo", run: cmdUsersInfo},
	)
}
