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

shares as (
    select
        s.*,
        c.days_7d,
        c.days_prev_7d,
        c.days_28d,
        c.days_prev_28d,
        s.human_7d + s.ai_7d as total_7d,
        s.human_prev_7d + s.ai_prev_7d as total_prev_7d,
        {{ share('s.ai_7d', 's.human_7d + s.ai_7d') }} as ai_share_7d,
        {{ share('s.ai_prev_7d', 's.human_prev_7d + s.ai_prev_7d') }} as ai_share_prev_7d,
        s.human_28d + s.ai_28d as total_28d,
        s.human_prev_28d + s.ai_prev_28d as total_prev_28d,
        {{ share('s.ai_28d', 's.human_28d + s.ai_28d') }} as ai_share_28d,
        {{ share('s.ai_prev_28d', 's.human_prev_28d + s.ai_prev_28d') }} as ai_share_prev_28d
    from sums as s
    left join coverage as c on c.project = s.project
),

rises as (
    select
        *,
        case when days_7d = 7 and days_prev_7d = 7 then {{ change('total_7d', 'total_prev_7d') }} end
            as change_7d,
        case when days_7d = 7 and days_prev_7d = 7 and total_7d >= 20 and total_prev_7d >= 20
            then ai_share_7d - ai_share_prev_7d end as ai_share_rise_7d,
        case when days_28d = 28 and days_prev_28d = 28 then {{ change('total_28d', 'total_prev_28d') }} end
            as change_28d,
        case when days_28d = 28 and days_prev_28d = 28 and total_28d >= 20 and total_prev_28d >= 20
            then ai_share_28d - ai_share_prev_28d end as ai_share_rise_28d
    from shares
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
    days_prev_28d,
    total_7d,
    total_prev_7d,
    ai_share_7d,
    ai_share_prev_7d,
    change_7d,
    cast(row_number() over (partition by project order by total_7d desc, path) as {{ dbt.type_bigint() }})
        as rank_7d,
    ai_share_rise_7d,
    case when ai_share_rise_7d is not null then cast(row_number() over (
        partition by project order by case when ai_share_rise_7d is null then 1 else 0 end, ai_share_rise_7d desc, path
    ) as {{ dbt.type_bigint() }}) end as mover_rank_7d,
    total_28d,
    total_prev_28d,
    ai_share_28d,
    ai_share_prev_28d,
    change_28d,
    cast(row_number() over (partition by project order by total_28d desc, path) as {{ dbt.type_bigint() }})
        as rank_28d,
    ai_share_rise_28d,
    case when ai_share_rise_28d is not null then cast(row_number() over (
        partition by project order by case when ai_share_rise_28d is null then 1 else 0 end, ai_share_rise_28d desc, path
    ) as {{ dbt.type_bigint() }}) end as mover_rank_28d
from rises
