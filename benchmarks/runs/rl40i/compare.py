import json, glob, statistics as st
R='/work/wt-rl40/benchmarks/runs/'
import sys
old = {0: R+'rl40/exp_E1_256_disc097_s0.json', **{s: R+f'rl40/d097_reacher_easy_256_s{s}.json' for s in (1,2,3,4)}}
if 'today' in sys.argv: old = {s: R+f'rl40i/old_reacher_easy_256_s{s}.json' for s in range(5)}
new = {2: R+'rl40h/exp_stable_reacher_easy_256_s2.json', **{s: R+f'rl40i/stable_reacher_easy_256_s{s}.json' for s in (0,1,3,4)}}
for extra in glob.glob(R+'rl40i/old_reacher_easy_256_s*.json'):
    pass
def get(f):
    try: d=json.load(open(f))
    except Exception: return None
    for t in d['tasks'].values():
        for r in t['runs']:
            if 'curve' in r: return r
def low_after(r):
    c=r['curve']; i=next((k for k,x in enumerate(c) if x['return']>=900),None)
    return None if i is None else min(x['return'] for x in c[i:])
rows={}
for name,src in (('old',old),('new',new)):
    for s,f in sorted(src.items()):
        r=get(f)
        if r is None or len(r['curve'])<16: print(name,s,'incomplete'); continue
        rows.setdefault(name,[]).append(r)
        t=r['steps_to_target']
        print(f"{name} seed {s}: best {r['best_return']:.0f} final {r['final_return']:.0f} to900 {'-' if t is None else f'{t/1e6:.2f}M'} low_after {low_after(r)} load {r.get('load')} total {r['total_s']:.0f}s")
        print('   ', ' '.join(f"{x['return']:.0f}" for x in r['curve']))
for name,rs in rows.items():
    b=[r['best_return'] for r in rs]; f=[r['final_return'] for r in rs]
    print(name, 'n',len(rs),'median best',st.median(b),'min best',min(b),'median final',st.median(f),'min final',min(f), 'reach900', sum(r['steps_to_target'] is not None for r in rs))
