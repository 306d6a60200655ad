-- One page over the last 7 and 28 complete days up to its project's last complete day, and the
-- windows of the same length before them: human, AI, total, AI share, the change in views and
-- in AI share, the rank by views (ties by path), and the movers (pages whose AI share rose most,
-- among pages with at least 20 views in both windows). Changes and movers are null unless both
-- windows were exported in full (days_7d, days_prev_7d, ...).
with days as (
    select project, date, not {{ adapter.quote('final') }} as provisional
    from ({{ complete_rows(source('docpipe', 'site_totals'), 'page_views') }}) as t
),

last_days as (
    select project, max(date) as last_day
    from days
    group by project
),

coverage as (
    select
        d.project,
        {{ total("case when " ~ days_between('d.date', 'l.last_day') ~ " < 7 then 1 else 0 end") }} as days_7d,
        {{ total("case when " ~ days_between('d.date', 'l.last_day') ~ " between 7 and 13 then 1 else 0 end") }} as days_prev_7d,
        {{ total("case when " ~ days_between('d.date', 'l.last_day') ~ " < 28 then 1 else 0 end") }} as days_28d,
        {{ total("case when " ~ days_between('d.date', 'l.last_day') ~ " between 28 and 55 then 1 else 0 end") }} as days_prev_28d
    from days as d
    inner join last_days as l on l.project = d.project
    group by d.project
),

aged as (
    select
        v.project,
        v.path,
        v.human,
        v.ai,
        l.last_day,
        d.provisional,
        {{ days_between('v.date', 'l.last_day') }} as age
    from ({{ complete_rows(source('docpipe', 'page_views'), 'page_views') }}) as v
    inner join last_days as l on l.project = v.project
    left join days as d
        on d.project = v.project and d.date = v.date
    where {{ days_between('v.date', 'l.last_day') }} < 56
),

sums as (
    select
        project,
        path,
        min(last_day) as last_day,
        {{ total('case when age < 7 then human else 0 end') }} as human_7d,
        {{ total('case when age between 7 and 13 then human else 0 end') }} as human_prev_7d,
        {{ total('case when age < 7 then ai else 0 end') }} as ai_7d,
        {{ total('case when age between 7 and 13 then ai else 0 end') }} as ai_prev_7d,
        {{ total('case when age < 28 then human else 0 end') }} as human_28d,
        {{ total('case when age between 28 and 55 then human else 0 end') }} as human_prev_28d,
        {{ total('case when age < 28 then ai else 0 end') }} as ai_28d,
        {{ total('case when age between 28 and 55 then ai else 0 end') }} as ai_prev_28d,
        {{ some('age < 7 and provisional') }} as provisional
    from aged
    group by project, path
),

windows as (
    select
        s.*,
        c.days_7d,
        c.days_prev_7d,
        c.days_28d,
        c.days_prev_28d
        {%- for w in [7, 28] %},
        s.human_{{ w }}d + s.ai_{{ w }}d as total_{{ w }}d,
        s.human_prev_{{ w }}d + s.ai_prev_{{ w }}d as total_prev_{{ w }}d,
        {{ share('s.ai_' ~ w ~ 'd', 's.human_' ~ w ~ 'd + s.ai_' ~ w ~ 'd') }} as ai_share_{{ w }}d,
        {{ share('s.ai_prev_' ~ w ~ 'd', 's.human_prev_' ~ w ~ 'd + s.ai_prev_' ~ w ~ 'd') }}
            as ai_share_prev_{{ w }}d,
        c.days_{{ w }}d = {{ w }} and c.days_prev_{{ w }}d = {{ w }} as complete_{{ w }}d
        {%- endfor %}
    from sums as s
    left join coverage as c on c.project = s.project
),

rises as (
    select
        *
        {%- for w in [7, 28] %},
        case when complete_{{ w }}d then {{ change('total_' ~ w ~ 'd', 'total_prev_' ~ w ~ 'd') }} end
            as change_{{ w }}d,
        case when complete_{{ w }}d and total_{{ w }}d >= 20 and total_prev_{{ w }}d >= 20
            then ai_share_{{ w }}d - ai_share_prev_{{ w }}d end as ai_share_rise_{{ w }}d
        {%- endfor %}
    from windows
)

select
    project,
    path,
    last_day,
    human_7d,
    human_prev_7d,
    ai_7d,
    ai_prev_7d,
    human_28d,
    human_prev_28d,
    ai_28d,
    ai_prev_28d,
    provisional,
    days_7d,
    days_prev_7d,
    days_28d,
    days_prev_28d
    {%- for w in [7, 28] %},
    total_{{ w }}d,
    total_prev_{{ w }}d,
    ai_share_{{ w }}d,
    ai_share_prev_{{ w }}d,
    change_{{ w }}d,
    cast(row_number() over (partition by project order by total_{{ w }}d desc, path)
        as {{ dbt.type_bigint() }}) as rank_{{ w }}d,
    ai_share_rise_{{ w }}d,
    case when ai_share_rise_{{ w }}d is not null then cast(row_number() over (
        partition by project
        order by case when ai_share_rise_{{ w }}d is null then 1 else 0 end, ai_share_rise_{{ w }}d desc, path
    ) as {{ dbt.type_bigint() }}) end as mover_rank_{{ w }}d
    {%- endfor %}
from rises
