"""The numba kernels of :mod:`mlroute.routing.kernels` (imported only through it, and only when used: numba's
import and the loading of the compiled code cost ~0.3 s, compiling them the first time 2-4 s)."""

import numpy as np
from numba import njit


@njit(cache=True, inline="always")
def _less(al, ak, bl, bk):
    return al < bl or (al == bl and ak < bk)


@njit(cache=True)
def _push(hl, hk, size, lvl, key):
    j = size
    hl[j] = lvl
    hk[j] = key
    while j > 0:
        p = (j - 1) >> 1
        if _less(hl[j], hk[j], hl[p], hk[p]):
            hl[j], hl[p] = hl[p], hl[j]
            hk[j], hk[p] = hk[p], hk[j]
            j = p
        else:
            break
    return size + 1


@njit(cache=True)
def _pop(hl, hk, size):
    lvl, key = hl[0], hk[0]
    size -= 1
    if size > 0:
        hl[0] = hl[size]
        hk[0] = hk[size]
        j = 0
        while True:
            left = 2 * j + 1
            if left >= size:
                break
            m = left
            if left + 1 < size and _less(hl[left + 1], hk[left + 1], hl[left], hk[left]):
                m = left + 1
            if _less(hl[m], hk[m], hl[j], hk[j]):
                hl[j], hl[m] = hl[m], hl[j]
                hk[j], hk[m] = hk[m], hk[j]
                j = m
            else:
                break
    return lvl, key, size


@njit(cache=True)
def _level(cap, load, count):
    return (cap - load if cap > load else 0.0) / count


@njit(cache=True)
def water_fill_events(flat, starts, caps, dem, rate, active, fload, rel_tol, tiny):
    n = len(rate)
    n_links = len(caps)
    # link -> its active flows, in flow order (a stable counting sort, as the reference's stable argsort)
    counts = np.zeros(n_links, np.int64)
    for i in range(n):
        if active[i]:
            for j in range(starts[i], starts[i + 1]):
                counts[flat[j]] += 1
    lstart = np.zeros(n_links + 1, np.int64)
    for link in range(n_links):
        lstart[link + 1] = lstart[link] + counts[link]
    fill = lstart[:-1].copy()
    link_flows = np.empty(lstart[n_links], np.int64)
    for i in range(n):
        if active[i]:
            for j in range(starts[i], starts[i + 1]):
                link = flat[j]
                link_flows[fill[link]] = i
                fill[link] += 1
    cnt = counts.copy()
    # one heap entry per link and per capped flow at most: a link is re-pushed only after its entry popped
    hl = np.empty(n_links + n + 1, np.float64)
    hk = np.empty(n_links + n + 1, np.int64)
    size = 0
    for link in range(n_links):
        if counts[link] > 0:
            size = _push(hl, hk, size, _level(caps[link], fload[link], counts[link]), link)
    remaining = 0
    for i in range(n):
        if active[i]:
            remaining += 1
            if np.isfinite(dem[i]):
                size = _push(hl, hk, size, dem[i], -1 - i)
    batch = np.empty(n_links + n, np.int64)
    frozen = np.empty(n, np.int64)
    while size > 0 and remaining > 0:
        lvl, key, size = _pop(hl, hk, size)
        if key >= 0:
            if cnt[key] == 0:
                continue
            cur = _level(caps[key], fload[key], cnt[key])
            if cur > lvl:  # a stale lower bound: back with its current level
                size = _push(hl, hk, size, cur, key)
                continue
        elif not active[-1 - key]:
            continue
        top = lvl + rel_tol * (lvl if lvl > tiny else tiny)
        nb = 1
        batch[0] = key
        while size > 0 and hl[0] <= top:
            _, k2, size = _pop(hl, hk, size)
            if k2 >= 0:
                if cnt[k2] == 0:
                    continue
                cur = _level(caps[k2], fload[k2], cnt[k2])
                if cur > top:
                    size = _push(hl, hk, size, cur, k2)
                    continue
                batch[nb] = k2
                nb += 1
            elif active[-1 - k2]:
                batch[nb] = k2
                nb += 1
        nf = 0
        for b in range(nb):
            key = batch[b]
            if key >= 0:
                for jj in range(lstart[key], lstart[key + 1]):
                    i = link_flows[jj]
                    if active[i]:
                        active[i] = False
                        rate[i] = dem[i] if dem[i] < lvl else lvl
                        frozen[nf] = i
                        nf += 1
            else:
                i = -1 - key
                if active[i]:
                    active[i] = False
                    rate[i] = dem[i] if dem[i] < lvl else lvl
                    frozen[nf] = i
                    nf += 1
        remaining -= nf
        for b in range(nf):
            i = frozen[b]
            r = rate[i]
            for j in range(starts[i], starts[i + 1]):
                fload[flat[j]] += r
                cnt[flat[j]] -= 1
    for i in range(n):
        if active[i]:
            rate[i] = np.inf
            active[i] = False


@njit(cache=True, inline="always")
def _row_at(base, down, up, p, r):
    """Where row ``r`` of a path set starts in the option table (``Problem.option_rows``)."""
    return (base if r < up else down) + r * p


@njit(cache=True)
def greedy_place(order, set_id, set_base, set_down, set_up, set_opts, set_rows, table, choice, loads):
    """Each flow on the first option with the least max load over its links. An option stops being read once its
    max reaches the best so far: it could not be strictly less, and the first of equal options is kept."""
    for i in order:
        s = set_id[i]
        p, rows, base, down, up = set_opts[s], set_rows[s], set_base[s], set_down[s], set_up[s]
        if p == 0 or rows == 0:
            continue
        best, best_cost = 0, -1
        for c in range(p):
            m = loads[table[_row_at(base, down, up, p, 0) + c]]
            if best_cost >= 0 and m >= best_cost:
                continue
            for r in range(1, rows):
                v = loads[table[_row_at(base, down, up, p, r) + c]]
                if v > m:
                    m = v
                    if best_cost >= 0 and m >= best_cost:
                        break
            if best_cost < 0 or m < best_cost:
                best, best_cost = c, m
        for r in range(rows):
            loads[table[_row_at(base, down, up, p, r) + best]] += 1
        choice[i] = best


@njit(cache=True, inline="always")
def _option_link(table, base, down, up, p, rows, c, col, dummy):
    return table[_row_at(base, down, up, p, col) + c] if col < rows else dummy


@njit(cache=True)
def _best_option(f, mat, choice, loads, set_id, set_base, set_down, set_up, set_opts, set_rows, table, dummy,
                 mode):
    """(best improving option of flow ``f`` or -1, its gain, its new max). An option stops being read once its
    new max reaches the current path's largest load: its gain (old max - new max, the old max at most that
    load) cannot be positive, so it can be neither the best nor an improving one."""
    kk = mat.shape[1]
    s = set_id[f]
    p, rows, base, down, up = set_opts[s], set_rows[s], set_base[s], set_down[s], set_up[s]
    cur = mat[f]
    best_q, best_g, best_new = -1, 0, 0
    cur_max = -1  # (the padding link's load is 0)
    for col in range(kk):
        if loads[cur[col]] > cur_max:
            cur_max = loads[cur[col]]
    for c in range(p):
        if c == choice[f]:
            continue
        newmax = -1
        oldmax = cur_max
        hopeless = False
        if mode == 0:  # disjoint options: the old max is the current path's max load, the same for every option
            for col in range(kk):
                v = loads[_option_link(table, base, down, up, p, rows, c, col, dummy)] + 1
                if v > newmax:
                    newmax = v
                    if newmax >= cur_max:
                        hopeless = True
                        break
        elif mode == 1:  # graded: a shared link sits in the same column
            oldmax = -1
            for col in range(kk):
                q = _option_link(table, base, down, up, p, rows, c, col, dummy)
                if q == cur[col]:
                    continue
                if loads[q] + 1 > newmax:
                    newmax = loads[q] + 1
                    if newmax >= cur_max:
                        hopeless = True
                        break
                if cur[col] != dummy and loads[cur[col]] > oldmax:
                    oldmax = loads[cur[col]]
        else:
            oldmax = -1
            for col in range(kk):
                q = _option_link(table, base, down, up, p, rows, c, col, dummy)
                shared = q == dummy
                if not shared:
                    for x in range(kk):
                        if cur[x] == q:
                            shared = True
                            break
                if not shared and loads[q] + 1 > newmax:
                    newmax = loads[q] + 1
                    if newmax >= cur_max:
                        hopeless = True
                        break
                x = cur[col]
                inside = x == dummy
                if not inside:
                    for y in range(kk):
                        if _option_link(table, base, down, up, p, rows, c, y, dummy) == x:
                            inside = True
                            break
                if not inside and loads[x] > oldmax:
                    oldmax = loads[x]
        if hopeless:
            continue
        g = oldmax - newmax
        if g > 0 and (best_q < 0 or g > best_g or (g == best_g and newmax < best_new)):
            best_q, best_g, best_new = c, g, newmax
    return best_q, best_g, best_new


@njit(cache=True)
def first_improving(block, mat, choice, loads, set_id, set_base, set_down, set_up, set_opts, set_rows, table, dummy,
                    mode):
    """The first flow of ``block`` with an improving move, and its best option (see ``kernels``)."""
    for b in range(len(block)):
        q, _, _ = _best_option(block[b], mat, choice, loads, set_id, set_base, set_down, set_up, set_opts, set_rows,
                               table, dummy, mode)
        if q >= 0:
            return b, q
    return len(block), -1


@njit(cache=True)
def improving(flows, mat, choice, loads, set_id, set_base, set_down, set_up, set_opts, set_rows, table, dummy, mode):
    """Which of ``flows`` have an improving move."""
    out = np.zeros(len(flows), np.bool_)
    for b in range(len(flows)):
        q, _, _ = _best_option(flows[b], mat, choice, loads, set_id, set_base, set_down, set_up, set_opts, set_rows,
                               table, dummy, mode)
        out[b] = q >= 0
    return out


@njit(cache=True)
def promising(flows, mat, choice, free, n_ge, threshold, set_id, set_base, set_down, set_up, set_opts, set_rows, table,
              dummy, positional):
    """Which of ``flows`` have another option whose share score is above ``threshold``."""
    kk = mat.shape[1]
    out = np.zeros(len(flows), np.bool_)
    for b in range(len(flows)):
        f = flows[b]
        s = set_id[f]
        p, rows, base, down, up = set_opts[s], set_rows[s], set_base[s], set_down[s], set_up[s]
        cur = mat[f]
        for c in range(p):
            if c == choice[f]:
                continue
            score = np.inf
            for col in range(kk):
                q = _option_link(table, base, down, up, p, rows, c, col, dummy)
                if q == dummy:
                    continue
                if positional:
                    shared = q == cur[col]
                else:
                    shared = False
                    for x in range(kk):
                        if cur[x] == q:
                            shared = True
                            break
                v = free[q] / max(n_ge[q], 1.0) if shared else free[q] / (n_ge[q] + 1.0)
                if v < score:
                    score = v
            if score > threshold:
                out[b] = True
                break
    return out


@njit(cache=True)
def level_loads(mat, rates, threshold, n_links):
    """Per link: the summed rate of its flows below ``threshold``, and the count of the others."""
    below = np.zeros(n_links)
    n_ge = np.zeros(n_links)
    for i in range(mat.shape[0]):
        r = rates[i]
        for col in range(mat.shape[1]):
            if r < threshold:
                below[mat[i, col]] += r
            else:
                n_ge[mat[i, col]] += 1.0
    return below, n_ge


@njit(cache=True)
def cmp_presorted(a, b, rel_tol, abs_tol):
    """Leximin order of two ascending rate vectors: the first position where they differ beyond the tolerance."""
    for i in range(len(a)):
        x, y = a[i], b[i]
        if np.isinf(x) and np.isinf(y) and (x > 0) == (y > 0):
            continue
        sx = 0.0 if np.isinf(x) else abs(x)
        sy = 0.0 if np.isinf(y) else abs(y)
        if abs(x - y) > rel_tol * max(max(sx, sy), abs_tol):
            return 1 if x > y else -1
    return 0


@njit(cache=True)
def water_fill_rounds(flat, owner, caps, dem, rate, active, fload, rel_tol, tiny, max_rounds):
    """``metric._water_fill_csr``'s level-by-level rounds, one pass over the incidences per step of each
    round instead of a dozen numpy temporaries; False when it stopped after ``max_rounds`` with flows active."""
    n_links = len(caps)
    n = len(rate)
    cnt = np.zeros(n_links, dtype=np.int64)
    lvl = np.empty(n_links)
    add = np.zeros(n_links)
    freeze = np.zeros(n, dtype=np.bool_)
    rounds = 0
    while True:
        any_active = False
        for i in range(n):
            if active[i]:
                any_active = True
                break
        if not any_active:
            return True
        if rounds >= max_rounds:
            return False
        rounds += 1
        cnt[:] = 0
        for j in range(len(flat)):
            if active[owner[j]]:
                cnt[flat[j]] += 1
        link_level = np.inf
        for lk in range(n_links):
            if cnt[lk] > 0:
                x = caps[lk] - fload[lk]
                if not x != x:  # np.maximum(x, 0.0): nan stays nan, -0.0 becomes 0.0
                    x = x if x > 0.0 else 0.0
                lvl[lk] = x / cnt[lk]
                if lvl[lk] < link_level:
                    link_level = lvl[lk]
            else:
                lvl[lk] = np.inf
        dem_level = np.inf
        for i in range(n):
            if active[i] and dem[i] < dem_level:
                dem_level = dem[i]
        level = dem_level if dem_level < link_level else link_level
        if not np.isfinite(level):
            for i in range(n):
                if active[i]:
                    rate[i] = np.inf
            return True
        a = abs(level)
        tol = rel_tol * (tiny if tiny > a else a)
        top = level + tol
        freeze[:] = False
        if link_level <= top:
            for j in range(len(flat)):
                if active[owner[j]] and lvl[flat[j]] <= top:
                    freeze[owner[j]] = True
        for i in range(n):
            if active[i]:
                if dem[i] <= top:
                    freeze[i] = True
                    rate[i] = dem[i] if dem[i] < level else level
                elif freeze[i]:
                    rate[i] = level
            else:
                freeze[i] = False
        for i in range(n):
            if freeze[i]:
                active[i] = False
        add[:] = 0.0
        for j in range(len(flat)):
            if freeze[owner[j]]:
                add[flat[j]] += rate[owner[j]]
        for lk in range(n_links):
            fload[lk] += add[lk]


@njit(cache=True)
def rank_within(keys, n_keys):
    """The rank of every element among those with the same key, in input order (a running count per key)."""
    seen = np.zeros(n_keys, dtype=np.int64)
    ranks = np.empty(len(keys), dtype=np.int64)
    for i in range(len(keys)):
        k = keys[i]
        ranks[i] = seen[k]
        seen[k] += 1
    return ranks


@njit(cache=True)
def bottleneck_screen(a, b, nlinks, up_i, dn_i, u, v, c):
    """``optimisers.mlroute._bottleneck_screen`` in one pass per step: integer counts only, so the same to
    the bit by construction."""
    n = len(a)
    n_sp = up_i.shape[1]
    loads = np.zeros(nlinks, dtype=np.int64)
    for j in range(n):
        loads[a[j]] += 1
        loads[b[j]] += 1
    m = 0
    for lk in range(nlinks):
        if loads[lk] > m:
            m = loads[lk]
    if m < 2:
        return loads, m, np.zeros(0, dtype=np.int64), np.zeros((0, n_sp), dtype=np.bool_)
    only = np.zeros(nlinks, dtype=np.int64)
    cold = np.zeros(nlinks, dtype=np.int64)
    n_hot = 0
    for j in range(n):
        ha, hb = loads[a[j]] == m, loads[b[j]] == m
        if ha and not hb:
            only[a[j]] += 1
        elif hb and not ha:
            only[b[j]] += 1
        elif not ha and not hb:
            cold[a[j]] += 1
            cold[b[j]] += 1
        if ha or hb:
            n_hot += 1
    hj = np.empty(n_hot, dtype=np.int64)
    gain = np.empty(n_hot, dtype=np.int64)
    k = 0
    for j in range(n):
        ha, hb = loads[a[j]] == m, loads[b[j]] == m
        if not (ha or hb):
            continue
        g = 0
        if ha:
            g += only[a[j]] - (1 if not hb else 0)
        if hb:
            g += only[b[j]] - (1 if not ha else 0)
        if g > 0:
            hj[k] = j
            gain[k] = g
            k += 1
    hj = hj[:k]
    promising = np.zeros((k, n_sp), dtype=np.bool_)
    for r in range(k):
        j = hj[r]
        for t in range(n_sp):
            if t == c[j]:
                continue
            la, lb = up_i[u[j], t], dn_i[v[j], t]
            lu, ld = loads[la], loads[lb]
            if lu >= m or ld >= m:
                continue
            cost = (cold[la] if lu == m - 1 else 0) + (cold[lb] if ld == m - 1 else 0)
            promising[r, t] = cost < gain[r]
    return loads, m, hj, promising


@njit(cache=True)
def edge_colours(xs, ys, n_left, n_right, k):
    """``bipartite_colouring.BipartiteColouring``: edges inserted in order, each given the first colour free at
    both ends, else colour a (the first free at its left end) after flipping the alternating (a, b)-path from its
    right end (b: the first free there); the same operations on arrays instead of lists of lists."""
    n = len(xs)
    left = np.full((n_left, k), -1, dtype=np.int64)
    right = np.full((n_right, k), -1, dtype=np.int64)
    colour = np.full(n, -1, dtype=np.int64)
    path = np.empty(n, dtype=np.int64)
    for e in range(n):
        x, y = xs[e], ys[e]
        done = False
        for c in range(k):
            if left[x, c] < 0 and right[y, c] < 0:
                left[x, c] = e
                right[y, c] = e
                colour[e] = c
                done = True
                break
        if done:
            continue
        a = 0
        while left[x, a] >= 0:
            a += 1
        b = 0
        while right[y, b] >= 0:
            b += 1
        m = 0
        side_right, v, c = True, y, a
        while True:
            f = right[v, c] if side_right else left[v, c]
            if f < 0:
                break
            path[m] = f
            m += 1
            v = xs[f] if side_right else ys[f]
            side_right = not side_right
            c = b if c == a else a
        for t in range(m):
            f = path[t]
            left[xs[f], colour[f]] = -1
            right[ys[f], colour[f]] = -1
        for t in range(m):
            f = path[t]
            cf = b if colour[f] == a else a
            colour[f] = cf
            left[xs[f], cf] = f
            right[ys[f], cf] = f
        left[x, a] = e
        right[y, a] = e
        colour[e] = a
    return colour


@njit(cache=True)
def hedera_demands(s_start, s_members, r_start, r_members, n, max_rounds, abs_tol):
    """``demand._estimate``: senders and receivers as groups of flow indices (CSR, groups and members in the
    reference's dictionary order), the same passes and the same float operations in the same order."""
    demand = np.zeros(n)
    converged = np.zeros(n, np.bool_)
    limited = np.zeros(n, np.bool_)
    for _ in range(max_rounds):
        changed = False
        for g in range(len(s_start) - 1):
            d_f = 0.0
            n_u = 0
            for j in range(s_start[g], s_start[g + 1]):
                i = s_members[j]
                if converged[i]:
                    d_f += demand[i]
                else:
                    n_u += 1
            if n_u:
                left = 1.0 - d_f
                e_s = (0.0 if 0.0 > left else left) / n_u  # max(left, 0.0) as Python takes it
                for j in range(s_start[g], s_start[g + 1]):
                    i = s_members[j]
                    if not converged[i] and abs(demand[i] - e_s) > abs_tol:
                        demand[i] = e_s
                        changed = True
        for g in range(len(r_start) - 1):
            lo, hi = r_start[g], r_start[g + 1]
            d_t = 0.0
            for j in range(lo, hi):
                d_t += demand[r_members[j]]
            if d_t <= 1.0 + abs_tol:
                continue
            for j in range(lo, hi):
                limited[r_members[j]] = True
            e_s = 1.0 / (hi - lo)
            d_s = 0.0
            while True:
                n_r = 0
                moved = False
                for j in range(lo, hi):
                    i = r_members[j]
                    if limited[i]:
                        if demand[i] < e_s - abs_tol:
                            d_s += demand[i]
                            limited[i] = False
                            moved = True
                        else:
                            n_r += 1
                if not moved or n_r == 0:
                    break
                e_s = (1.0 - d_s) / n_r
            for j in range(lo, hi):
                i = r_members[j]
                if limited[i]:
                    if abs(demand[i] - e_s) > abs_tol or not converged[i]:
                        changed = True
                    demand[i] = e_s
                    converged[i] = True
        if not changed:
            break
    return demand


@njit(cache=True)
def fill_link_matrix(flows, ch, set_id, set_base, set_down, set_up, set_opts, set_rows, table, out):
    """Row ``flows[j]`` of ``out`` := the links of option ``ch[j]`` of its path set (``Problem._link_matrix``)."""
    for j in range(len(flows)):
        i, c = flows[j], ch[j]
        s = set_id[i]
        p, base, down, up = set_opts[s], set_base[s], set_down[s], set_up[s]
        for col in range(set_rows[s]):
            out[i, col] = table[_row_at(base, down, up, p, col) + c]
