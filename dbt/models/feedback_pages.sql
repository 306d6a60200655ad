-- One page's feedback over the last 28 complete days (to its project's last day with feedback)
-- and the 28 before: thumbs up and down, the thumbs-down rate and its rise (null unless both
-- windows have 5 votes), entries, the latest comments (up to 5, newest first); down_rank_28d 1
-- for the page with most thumbs down, then the highest rate, then by path.
with rows as (
    {{ aged(source('docpipe', 'feedback'), 'feedback', 56) }}
),

comments as (
    select
        project,
        path,
        {{ dbt.listagg('comment', "' | '", 'order by created_at desc', 5) }} as latest_comments
    from rows
    where age < 28 and comment is not null
    group by project, path
),

pages as (
    select
        project,
        path,
        min(last_day) as last_day,
        {{ total('case when helpful and age < 28 then 1 else 0 end') }} as up_28d,
        {{ total('case when not helpful and age < 28 then 1 else 0 end') }} as down_28d,
        {{ total('case when helpful and age >= 28 then 1 else 0 end') }} as up_prev_28d,
        {{ total('case when not helpful and age >= 28 then 1 else 0 end') }} as down_prev_28d,
        {{ total('case when age < 28 then 1 else 0 end') }} as entries_28d
    from rows
    group by project, path
),

rates as (
    select
        p.*,
        p.up_28d + p.down_28d as votes_28d,
        p.up_prev_28d + p.down_prev_28d as votes_prev_28d,
        {{ share('p.down_28d', 'p.up_28d + p.down_28d') }} as down_rate_28d,
        {{ share('p.down_prev_28d', 'p.up_prev_28d + p.down_prev_28d') }} as down_rate_prev_28d,
        c.latest_comments
    from pages as p
    left join comments as c on c.project = p.project and c.path = p.path
)

select
    project,
    path,
    last_day,
    up_28d,
    down_28d,
    votes_28d,
    down_rate_28d,
    case when down_28d > 0 then cast(row_number() over (
        partition by project
        order by case when down_28d > 0 then 0 else 1 end, down_28d desc, down_rate_28d desc, path
    ) as {{ dbt.type_bigint() }}) end as down_rank_28d,
    up_prev_28d,
    down_prev_28d,
    votes_prev_28d,
    down_rate_prev_28d,
    case when votes_28d >= 5 and votes_prev_28d >= 5 then down_rate_28d - down_rate_prev_28d end
        as down_rate_rise_28d,
    entries_28d,
    latest_comments
from rates
